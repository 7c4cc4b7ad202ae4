package lockgen

import (
	"fmt"
	"strings"
)

// specReference renders docs/spec.md, the reference of locks.yaml, from the
// schema's descriptions and kindRules: the fields, values and rules live
// in shape.go and kindrules.go only.
func specReference() []byte {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# locks.yaml reference\n\n")
	w("<!-- Generated from the schema in shape.go and the rules in kindrules.go by\n")
	w("     go test -run TestSpecReferenceIsCurrent -update; edit those, not this file. -->\n\n")
	w("A spec declares the locks of one Go package. A complete one: [example/locks.yaml](../example/locks.yaml).\n")
	w("Editors check it with the same rules through [locks.schema.json](../locks.schema.json) (see [editor support](editor.md));\n")
	w("`lockgen` also checks what a schema cannot: placeholders against params, members against locks, Go types.\n\n")
	w("```yaml\n%s```\n\n", referenceExample)

	w("## Top level\n\n")
	fieldTable(&b, specSchema, nil)
	w("## defaults\n\n%s\n\n", mdEscape(specSchema.prop("defaults").desc))
	fieldTable(&b, specSchema.prop("defaults"), nil)
	lock := def("lock")
	w("## A lock: `locks.<Name>`\n\n%s\n\n", mdEscape(lock.desc))
	fieldTable(&b, lock, kindsOf(""))
	w("## fairness\n\n%s\n\n", mdEscape(lock.prop("fairness").desc))
	fieldTable(&b, lock.prop("fairness"), kindsOf("fairness."))
	w("## Values\n\n")
	for _, name := range []string{"duration", "lease", "waitTime", "syncReplicas", "pattern"} {
		w("- **%s**: %s\n", name, mdEscape(def(name).desc))
	}
	w("\n## Kinds\n\n%s\n\n", mdEscape(lock.prop("kind").desc))
	w("| field |")
	for _, k := range Kinds {
		w(" %s |", k)
	}
	w("\n|---|%s\n", strings.Repeat("---|", len(Kinds)))
	for _, r := range kindRules {
		w("| `%s` |", r.field)
		for _, k := range Kinds {
			mark := ""
			switch {
			case hasKind(r.kinds, k) && r.required:
				mark = "required"
			case hasKind(r.kinds, k):
				mark = "yes"
			}
			w(" %s |", mark)
		}
		w("\n")
	}
	w("\nThe other fields (`doc`, `kind`, `waitTime`) apply to every kind; for a latch, waitTime bounds Await<Name>.\n")
	return []byte(b.String())
}

const referenceExample = `version: 1
package: locks
output: locks_gen.go          # default
defaults:
  lease: watchdog             # default
  waitTime: 5s                # default
locks:
  OrderLock:
    doc: Serialises every write to one order.
    key: "order:${orderID}"
    params: {orderID: int64}
    waitTime: 3s
  TenantReportLock:
    key: "report:${tenant}:${month}"
    params: {tenant: string, month: uint8}
    slot: "${tenant}"
`

// kindsOf maps each field under prefix to the kinds that take it.
func kindsOf(prefix string) map[string][]Kind {
	m := map[string][]Kind{}
	for _, r := range kindRules {
		if name, ok := strings.CutPrefix(r.field, prefix); ok && !strings.Contains(name, ".") {
			m[name] = r.kinds
		}
	}
	return m
}

// fieldTable writes the properties of s: name, what it takes, meaning.
func fieldTable(b *strings.Builder, s *schema, kinds map[string][]Kind) {
	if kinds != nil {
		b.WriteString("| field | kinds | value | meaning |\n|---|---|---|---|\n")
	} else {
		b.WriteString("| field | required | value | meaning |\n|---|---|---|---|\n")
	}
	for _, p := range s.props {
		ps := p.s
		desc := ps.desc
		if desc == "" {
			desc = ps.resolve().desc
		}
		second := ""
		if kinds != nil {
			second = "all"
			if ks, ok := kinds[p.name]; ok {
				names := make([]string, len(ks))
				for i, k := range ks {
					names[i] = string(k)
				}
				second = strings.Join(names, ", ")
			}
		} else if contains(s.required, p.name) {
			second = "yes"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", p.name, second, mdEscape(wantOf(ps)), mdEscape(desc))
	}
	b.WriteString("\n")
}

// mdEscape keeps a description inside its table cell.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}
