// Compiles locks.schema.json with ajv in strict mode and validates the
// instances it is given. Reads {"schema": ..., "instances": {"name": data}}
// on stdin; writes {"warnings": [...], "valid": {"name": true|false}}.
// Any message ajv logs while compiling (strict mode reports unknown
// keywords, missing types, ... that way or by throwing) is a warning.
import Ajv2020 from "ajv/dist/2020.js";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { schema, instances } = JSON.parse(input);

const warnings = [];
const logger = {
  log: (...a) => warnings.push(a.join(" ")),
  warn: (...a) => warnings.push(a.join(" ")),
  error: (...a) => warnings.push(a.join(" ")),
};
const ajv = new Ajv2020({ strict: true, allErrors: true, logger });
let validate;
try {
  validate = ajv.compile(schema);
} catch (e) {
  warnings.push("compile: " + e.message);
}
const valid = {};
if (validate) {
  for (const [name, data] of Object.entries(instances)) valid[name] = validate(data);
}
process.stdout.write(JSON.stringify({ warnings, valid }));
