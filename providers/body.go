package providers

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Bounds of a flattened body: a provider body is at most the caller's read
// bound (64 KiB in the engine), and a rule never needs more than its first
// fields.
const (
	maxBodyFields = 2000
	maxFieldValue = 512
	maxBodyDepth  = 32
)

// bodyFields is a response body as the rules read it: every scalar of a
// JSON body under its path, with object keys joined by '.' and array
// elements marked "[]" ("errors[].extensions.code", "[].errorCode"). Values
// are the scalars as text: strings as is, numbers as written, true, false,
// null. A body that is not JSON (cut off by the caller's bound, HTML from
// a proxy, text/plain) is scanned instead: a path then yields the values of
// its last key found anywhere in the body.
type bodyFields struct {
	raw   []byte
	doc   any // the decoded document; nil when the body is not JSON
	isDoc bool
	paths map[string][]string
	order []string // paths in document order, for wildcard lookups
}

// parseBody flattens b. It never fails: the worst body is one with no
// fields.
func parseBody(b []byte) *bodyFields {
	f := &bodyFields{raw: b, paths: map[string][]string{}}
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		return f
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return f
	}
	f.doc, f.isDoc = doc, true
	f.walk("", doc, 0)
	return f
}

func (f *bodyFields) walk(path string, v any, depth int) {
	if len(f.order) >= maxBodyFields || depth > maxBodyDepth {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // deterministic under the field bound
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			f.walk(p, x[k], depth+1)
		}
	case []any:
		for _, child := range x {
			f.walk(path+"[]", child, depth+1)
		}
	default:
		f.add(path, scalarText(x))
	}
}

func (f *bodyFields) add(path, v string) {
	if _, ok := f.paths[path]; !ok {
		f.order = append(f.order, path)
	}
	f.paths[path] = append(f.paths[path], Cut(v, maxFieldValue))
}

// scalarText writes a decoded JSON scalar as text.
func scalarText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	return ""
}

// scanFieldRe finds `"key": value` pairs with a scalar value in a body that
// is not valid JSON.
var scanFieldRe = regexp.MustCompile(`"([A-Za-z0-9_@.$-]{1,64})"\s*:\s*(?:"((?:[^"\\]|\\.){0,512})"|(-?[0-9][0-9.eE+-]{0,30}|true|false|null))`)

// get returns the values at path. For a body that is not JSON it returns
// the values of path's last key wherever they appear.
func (f *bodyFields) get(path string) []string {
	if f.isDoc {
		return f.paths[path]
	}
	key := path
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		key = key[i+1:]
	}
	key = strings.TrimSuffix(key, "[]")
	var out []string
	for _, m := range scanFieldRe.FindAllSubmatch(f.raw, 256) {
		if string(m[1]) != key {
			continue
		}
		if m[3] != nil {
			out = append(out, string(m[3]))
			continue
		}
		v, err := strconv.Unquote(`"` + string(m[2]) + `"`)
		if err != nil {
			v = string(m[2])
		}
		out = append(out, v)
	}
	return out
}

// first is the first value at path; empty when none.
func (f *bodyFields) first(path string) string {
	if vs := f.get(path); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// has reports whether any value at path is one of values.
func (f *bodyFields) has(path string, values ...string) bool {
	for _, v := range f.get(path) {
		for _, want := range values {
			if v == want {
				return true
			}
		}
	}
	return false
}

// present reports whether path has any value.
func (f *bodyFields) present(path string) bool { return len(f.get(path)) > 0 }

// anyPath reports whether a path of a JSON body satisfies match.
func (f *bodyFields) anyPath(match func(path string) bool) bool {
	for _, p := range f.order {
		if match(p) {
			return true
		}
	}
	return false
}

// pointer resolves an RFC 6901 JSON pointer against a JSON body and returns
// the scalar it names as text; ok is false when the body is not JSON, the
// pointer names nothing, or it names an object or array.
func (f *bodyFields) pointer(ptr string) (string, bool) {
	if !f.isDoc || (ptr != "" && ptr[0] != '/') {
		return "", false
	}
	v := f.doc
	if ptr != "" {
		for _, tok := range strings.Split(ptr[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch x := v.(type) {
			case map[string]any:
				child, ok := x[tok]
				if !ok {
					return "", false
				}
				v = child
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(x) || (len(tok) > 1 && tok[0] == '0') {
					return "", false
				}
				v = x[i]
			default:
				return "", false
			}
		}
	}
	switch v.(type) {
	case map[string]any, []any:
		return "", false
	}
	return Cut(scalarText(v), maxFieldValue), true
}

// validPointer reports whether p is RFC 6901 syntax naming a member (not
// the whole document): '/'-separated tokens where '~' is followed by 0 or 1.
func validPointer(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 >= len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return false
		}
	}
	return true
}
