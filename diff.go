package lockgen

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Diff compares the file with what is on disk and returns a unified diff
// (old = disk, new = generated), or "" when they are identical. A missing
// file diffs against nothing.
func (o *Output) Diff(name string) (string, error) {
	old, err := os.ReadFile(o.Path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if bytes.Equal(old, o.Content) && err == nil {
		return "", nil
	}
	from := "a/" + name
	if err != nil {
		from = "/dev/null"
	}
	return unifiedDiff(from, "b/"+name, string(old), string(o.Content)), nil
}

type edit struct {
	op   byte // ' ', '-', '+'
	line string
}

// unifiedDiff renders a line diff in unified format with 3 lines of context.
func unifiedDiff(fromName, toName, a, b string) string {
	edits := lineDiff(splitLines(a), splitLines(b))
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", fromName, toName)
	const ctx = 3
	for i := 0; i < len(edits); {
		if edits[i].op == ' ' {
			i++
			continue
		}
		// A hunk runs from ctx lines before this change to ctx lines after
		// the last change that is within 2*ctx lines of the previous one.
		start := max(0, i-ctx)
		end := i
		for j := i; j < len(edits); j++ {
			if edits[j].op != ' ' {
				end = j
			} else if j-end > 2*ctx {
				break
			}
		}
		stop := min(len(edits), end+ctx+1)
		aLine, bLine := 1, 1
		for _, e := range edits[:start] {
			if e.op != '+' {
				aLine++
			}
			if e.op != '-' {
				bLine++
			}
		}
		aN, bN := 0, 0
		for _, e := range edits[start:stop] {
			if e.op != '+' {
				aN++
			}
			if e.op != '-' {
				bN++
			}
		}
		if aN == 0 {
			aLine--
		}
		if bN == 0 {
			bLine--
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", aLine, aN, bLine, bN)
		for _, e := range edits[start:stop] {
			out.WriteByte(e.op)
			out.WriteString(e.line)
			out.WriteByte('\n')
		}
		i = stop
	}
	return out.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// lineDiff is a longest-common-subsequence diff after trimming the common
// head and tail. Generated files change in few places, so the middle is
// small; a huge middle is shown as removed and added rather than spending
// quadratic memory on it.
func lineDiff(a, b []string) []edit {
	var head, tail []edit
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		head = append(head, edit{' ', a[0]})
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		tail = append([]edit{{' ', a[len(a)-1]}}, tail...)
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	var mid []edit
	if len(a)*len(b) > 16_000_000 {
		for _, l := range a {
			mid = append(mid, edit{'-', l})
		}
		for _, l := range b {
			mid = append(mid, edit{'+', l})
		}
	} else {
		// lcs[i][j] = LCS length of a[i:], b[j:].
		lcs := make([][]int32, len(a)+1)
		for i := range lcs {
			lcs[i] = make([]int32, len(b)+1)
		}
		for i := len(a) - 1; i >= 0; i-- {
			for j := len(b) - 1; j >= 0; j-- {
				if a[i] == b[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(a) || j < len(b) {
			switch {
			case i < len(a) && j < len(b) && a[i] == b[j]:
				mid = append(mid, edit{' ', a[i]})
				i, j = i+1, j+1
			case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
				mid = append(mid, edit{'-', a[i]})
				i++
			default:
				mid = append(mid, edit{'+', b[j]})
				j++
			}
		}
	}
	return append(append(head, mid...), tail...)
}
