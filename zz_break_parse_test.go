package lockgen

import (
	"strings"
	"testing"
)

// byte and uint8 are one Go type; a multi lock whose members spell a
// shared param each way is refused as "two types".
func TestZZSharedParamByteUint8(t *testing.T) {
	src := "version: 1\npackage: locks\nlocks:\n  A:\n    key: \"a:${id}\"\n    params: {id: byte}\n  B:\n    key: \"b:${id}\"\n    params: {id: uint8}\n  M:\n    kind: multi\n    members: [A, B]\n"
	if _, err := Parse("locks.yaml", []byte(src)); err != nil {
		t.Errorf("byte and uint8 are identical types, yet: %v", err)
	}
}

// A user type with an integer underlying type renders digits only
// (strconv.FormatInt), but the key-space check reads it as any string, so
// order:${id} is said to collide with order:all.
func TestZZUserIntegerTypeKeySpaceFalsePositive(t *testing.T) {
	src := "version: 1\npackage: locks\nlocks:\n  A:\n    key: \"order:${id}\"\n    params: {id: time.Duration}\n  B:\n    key: \"order:all\"\n"
	if _, err := Parse("locks.yaml", []byte(src)); err != nil {
		t.Errorf("an integer user type cannot render \"all\", yet: %v", err)
	}
}

// A double-quoted key with an escape before the error: the column is
// computed on the decoded text, so it points left of the placeholder.
func TestZZEscapedKeyColumn(t *testing.T) {
	src := "version: 1\npackage: locks\nlocks:\n  A:\n    key: \"\\u00fc:${}\"\n"
	//                                                  col 10 is the quote; ${ is at col 18
	_, err := Parse("locks.yaml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), "locks.yaml:5:18:") {
		t.Errorf("want the error at 5:18 (the ${}), got %v", err)
	}
}

// A merge key is reported twice: once by the parser, once by the schema.
func TestZZMergeKeyReportedOnce(t *testing.T) {
	src := "version: 1\npackage: locks\nlocks:\n  A:\n    <<: {doc: x}\n    key: \"a\"\n"
	_, err := Parse("locks.yaml", []byte(src))
	if n := strings.Count(err.Error(), "locks.yaml:5:5:"); n != 1 {
		t.Errorf("want one error at the << key, got %d:\n%v", n, err)
	}
}
