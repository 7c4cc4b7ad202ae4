package lockgen

import (
	"go/token"
	"go/types"
	"strings"
	"unicode"
	"unicode/utf8"
)

// isIdent reports whether s is a Go identifier and not a keyword.
func isIdent(s string) bool {
	return token.IsIdentifier(s)
}

// isKeyword reports whether s is one of Go's 25 keywords, which look like
// identifiers but cannot name anything.
func isKeyword(s string) bool {
	return token.IsKeyword(s)
}

// keywordAlternative is a name to suggest instead of keyword kw.
func keywordAlternative(kw string) string {
	switch kw {
	case "type":
		return "typ"
	case "package":
		return "pkg"
	case "func":
		return "function"
	case "default":
		return "def"
	}
	return kw + "Name"
}

func isExported(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsUpper(r)
}

// lowerFirst makes the unexported form of an exported name: OrderLock ->
// orderLock, URL -> uRL (unique, which is all that matters for helpers).
func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToLower(r)) + s[n:]
}

// camel turns "order-lock" or "order_lock" into "OrderLock": the fix shown
// for a lock name that is not an exported identifier.
func camel(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if up {
				r = unicode.ToUpper(r)
				up = false
			}
			if b.Len() == 0 && unicode.IsDigit(r) {
				b.WriteString("Lock")
			}
			b.WriteRune(r)
		default:
			up = true
		}
	}
	if b.Len() == 0 {
		return "MyLock"
	}
	return b.String()
}

// reservedParams are names a param must not take: the generated functions
// use them for their own parameters, receiver, locals and imported
// packages.
var reservedParams = []string{"ctx", "fn", "l", "m", "err", "key", "keyPart", "keyEscaper", "context", "errors", "runtime", "strconv", "strings", "time"}

// predeclared lists the names a param must not take besides reservedParams:
// the blank identifier, which generated code cannot pass on, and Go's
// predeclared identifiers (types.Universe), which generated code uses as
// conversions (uint64(id)) and values (nil, false), so a param of that
// name would shadow them.
func predeclared() []string {
	return append([]string{"_"}, types.Universe.Names()...)
}

func isPredeclared(s string) bool {
	return types.Universe.Lookup(s) != nil
}

func isReservedParam(s string) bool {
	for _, r := range reservedParams {
		if s == r {
			return true
		}
	}
	return false
}
