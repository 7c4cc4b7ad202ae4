package lockgen

import (
	"strings"

	"github.com/lockgen/lockgen/templates"
)

// ParamType is the Go type of a key param: a basic type such as int64, or
// a user type written "import/path.Type".
type ParamType struct {
	Basic string // set for basic types
	Path  string // import path of a user type
	Name  string // name of a user type

	render  templates.Render // how the value becomes key text, once resolved
	pkgName string           // package name of a user type, once resolved
}

func (t ParamType) String() string {
	if t.Basic != "" {
		return t.Basic
	}
	return t.Path + "." + t.Name
}

// basicRender maps the Go basic types that can be key params to how they
// are rendered.
var basicRender = map[string]templates.Render{
	"string": templates.RenderString,
	"bool":   templates.RenderBool,
	"int":    templates.RenderInt, "int8": templates.RenderInt, "int16": templates.RenderInt,
	"int32": templates.RenderInt, "int64": templates.RenderInt, "rune": templates.RenderInt,
	"uint": templates.RenderUint, "uint8": templates.RenderUint, "uint16": templates.RenderUint,
	"uint32": templates.RenderUint, "uint64": templates.RenderUint, "byte": templates.RenderUint,
}

// basicNames is ordered by how common the type is as a key, so a typo
// suggests the likelier one first.
var basicNames = []string{"string", "int64", "int", "uint64", "uint", "int32", "uint32", "int16", "uint16", "int8", "uint8", "byte", "rune", "bool"}

// notKeyable are Go basic types that are rejected, with the reason.
var notKeyable = map[string]string{
	"float32":    "floats render ambiguously (1 vs 1.0)",
	"float64":    "floats render ambiguously (1 vs 1.0)",
	"complex64":  "complex numbers make poor keys",
	"complex128": "complex numbers make poor keys",
	"uintptr":    "pointers differ between processes",
	"any":        "its text is unknown until run time",
	"error":      "its text is unknown until run time",
}

// parseParamType checks the syntax of a type as written. The message, when
// not empty, says what is wrong and how to fix it.
func parseParamType(s string) (ParamType, string) {
	if r, ok := basicRender[s]; ok {
		return ParamType{Basic: s, render: r}, ""
	}
	if why, ok := notKeyable[s]; ok {
		return ParamType{}, "type " + s + " cannot be a key param: " + why + " (use an integer type or string)"
	}
	slash := strings.LastIndexByte(s, '/')
	dot := strings.LastIndexByte(s, '.')
	if dot <= slash {
		if s == "" {
			return ParamType{}, "type is empty (write a Go basic type such as string or int64, or import/path.Type)"
		}
		if sug := suggest(s, basicNames); sug != "" {
			return ParamType{}, "unknown type \"" + s + "\" (did you mean \"" + sug + "\"?)"
		}
		return ParamType{}, "unknown type \"" + s + "\" (use a Go basic type such as string or int64, or a user type written import/path.Type)"
	}
	path, name := s[:dot], s[dot+1:]
	if path == "" || strings.ContainsAny(path, " \t\\:\"'`") || strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") {
		return ParamType{}, "\"" + s + "\" is not a valid import path and type (write it as github.com/acme/shop/domain.OrderID)"
	}
	if !isIdent(name) || !isExported(name) {
		return ParamType{}, "\"" + name + "\" is not an exported type name (write it as import/path.Type, e.g. github.com/acme/shop/domain.OrderID)"
	}
	return ParamType{Path: path, Name: name}, ""
}

// goAlias maps byte and rune to the types they are aliases of, so that a
// param spelled byte in one lock and uint8 in another is one type.
func goAlias(basic string) string {
	switch basic {
	case "byte":
		return "uint8"
	case "rune":
		return "int32"
	}
	return basic
}
