package templates

import (
	"strings"

	"github.com/dave/jennifer/jen"
)

// keyFuncName is the unexported function that renders a lock's key.
func keyFuncName(l *Lock) string { return lowerFirst(l.Name) + "Key" }

// optionsVarName is the unexported variable holding a lock's options.
func optionsVarName(l *Lock) string { return lowerFirst(l.Name) + "Options" }

func lowerFirst(s string) string {
	for i, r := range s {
		if i == 0 {
			return strings.ToLower(string(r)) + s[len(string(r)):]
		}
	}
	return s
}

// paramList is the typed parameter list, e.g. (orderID int64, sku string).
func paramList(l *Lock) []jen.Code {
	ps := make([]jen.Code, len(l.Params))
	for i, p := range l.Params {
		ps[i] = jen.Id(p.Name).Add(typeCode(p))
	}
	return ps
}

// argList passes the params on by name.
func argList(l *Lock) []jen.Code {
	as := make([]jen.Code, len(l.Params))
	for i, p := range l.Params {
		as[i] = jen.Id(p.Name)
	}
	return as
}

func typeCode(p Param) jen.Code {
	if p.TypePath == "" {
		return jen.Id(p.TypeName)
	}
	return jen.Qual(p.TypePath, p.TypeName)
}

// keyFunc emits the function that renders the key of l from its params:
// string concatenation and strconv only. It returns (string, error) when
// a param is rendered with MarshalText, which can fail.
func keyFunc(l *Lock) jen.Code {
	var pre []jen.Code
	textVar := map[string]string{}
	if l.fallible() {
		taken := map[string]bool{}
		for _, p := range l.Params {
			taken[p.Name] = true
		}
		for _, p := range l.Params {
			if p.Render != RenderText {
				continue
			}
			v := p.Name + "Text"
			for taken[v] {
				v += "_"
			}
			taken[v] = true
			textVar[p.Name] = v
			pre = append(pre,
				jen.List(jen.Id(v), jen.Err()).Op(":=").Id(p.Name).Dot("MarshalText").Call(),
				jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Lit(""), jen.Err())),
			)
		}
	}
	byName := map[string]Param{}
	for _, p := range l.Params {
		byName[p.Name] = p
	}
	var expr *jen.Statement
	for _, s := range l.Segments {
		var part jen.Code
		if s.Param == "" {
			part = jen.Lit(s.Lit)
		} else {
			part = valueCode(byName[s.Param], textVar[s.Param])
		}
		if expr == nil {
			expr = jen.Add(part)
		} else {
			expr = expr.Op("+").Add(part)
		}
	}
	if expr == nil {
		expr = jen.Lit("")
	}
	sig := jen.Func().Id(keyFuncName(l)).Params(paramList(l)...)
	if l.fallible() {
		body := append(pre, jen.Return(expr, jen.Nil()))
		return jen.Add(
			comment(keyFuncName(l)+" renders the key "+l.Key+"."),
			jen.Line(),
			sig.Params(jen.String(), jen.Error()).Block(body...),
		)
	}
	return jen.Add(
		comment(keyFuncName(l)+" renders the key "+l.Key+"."),
		jen.Line(),
		sig.String().Block(jen.Return(expr)),
	)
}

// valueCode renders one param as key text.
func valueCode(p Param, textVar string) jen.Code {
	v := jen.Id(p.Name)
	conv := func(basic string) jen.Code {
		if p.Basic && p.TypeName == basic {
			return v
		}
		return jen.Id(basic).Call(v)
	}
	switch p.Render {
	case RenderString:
		return jen.Id("keyPart").Call(conv("string"))
	case RenderInt:
		return jen.Qual("strconv", "FormatInt").Call(conv("int64"), jen.Lit(10))
	case RenderUint:
		return jen.Qual("strconv", "FormatUint").Call(conv("uint64"), jen.Lit(10))
	case RenderBool:
		return jen.Qual("strconv", "FormatBool").Call(conv("bool"))
	case RenderStringer:
		return jen.Id("keyPart").Call(jen.Id(p.Name).Dot("String").Call())
	case RenderText:
		return jen.Id("keyPart").Call(jen.String().Call(jen.Id(textVar)))
	}
	return jen.Lit("")
}
