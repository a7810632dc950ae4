package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
)

// writeJSON writes v as application/json with status.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	s.write(w, r, status, "application/json", v)
}

// write encodes v into a buffer first, so an encoding failure is still
// answered with a clean 500.
func (s *Server) write(w http.ResponseWriter, r *http.Request, status int, contentType string, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		s.log.ErrorContext(r.Context(), "encode response", "method", r.Method, "path", r.URL.EscapedPath(), "err", err)
		status, contentType = http.StatusInternalServerError, "application/problem+json"
		buf.Reset()
		p := newProblem(status, "internal error; the server log has the details")
		p.Instance = r.URL.EscapedPath()
		_ = json.NewEncoder(&buf).Encode(p)
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// decodeJSON reads r's body, at most limit bytes, into dst: exactly one
// JSON value with no unknown fields and nothing after it. An empty body
// leaves dst untouched when allowEmpty is set. Its errors are Problems:
// 415 for a body that is not application/json, 413 for one over limit, 400
// for malformed JSON, unknown fields and wrong types.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, dst any, allowEmpty bool) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		if allowEmpty {
			return nil
		}
		return newProblem(http.StatusBadRequest, "the request body is empty: send a JSON object")
	}
	if err := checkJSONContentType(ct); err != nil {
		return err
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		if errors.Is(err, io.EOF) {
			if allowEmpty {
				return nil
			}
			return newProblem(http.StatusBadRequest, "the request body is empty: send a JSON object")
		}
		return decodeProblem(err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return decodeProblem(err, limit)
		}
		return newProblem(http.StatusBadRequest, "malformed JSON: unexpected data after the JSON object")
	}
	return nil
}

// checkJSONContentType returns a 415 problem unless ct is application/json
// (in UTF-8, the only charset JSON has).
func checkJSONContentType(ct string) error {
	mt, params, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" {
		if cs, ok := params["charset"]; !ok || strings.EqualFold(cs, "utf-8") {
			return nil
		}
	}
	got := ct
	if got == "" {
		got = "none"
	}
	return newProblem(http.StatusUnsupportedMediaType,
		fmt.Sprintf("the request body must be sent as Content-Type: application/json (got %s)", got))
}

// decodeProblem turns a json.Decoder error into the problem answering it.
func decodeProblem(err error, limit int64) Problem {
	var (
		tooLarge *http.MaxBytesError
		syntax   *json.SyntaxError
		typ      *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooLarge):
		return newProblem(http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body exceeds %d bytes", limit))
	case errors.As(err, &syntax):
		return newProblem(http.StatusBadRequest, fmt.Sprintf("malformed JSON at byte %d: %s", syntax.Offset, strings.TrimPrefix(syntax.Error(), "json: ")))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return newProblem(http.StatusBadRequest, "malformed JSON: the body ends before the JSON value does")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return newProblem(http.StatusBadRequest, fmt.Sprintf("the request body must be a JSON object, not %s", jsonKind(typ.Value)))
		}
		return newProblem(http.StatusBadRequest, fmt.Sprintf("field %q must be %s, not %s", typ.Field, jsonTypeName(typ), jsonKind(typ.Value)))
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "unknown field ") {
		return newProblem(http.StatusBadRequest, msg+": the body may hold only the documented fields")
	}
	return newProblem(http.StatusBadRequest, "malformed JSON: "+msg)
}

// jsonKind names the JSON kind an UnmarshalTypeError saw.
func jsonKind(v string) string {
	switch {
	case v == "":
		return "that value"
	case v == "object", v == "array":
		return "an " + v
	case strings.HasPrefix(v, "number "):
		return strings.TrimPrefix(v, "number ")
	case v == "number":
		return "a number"
	case v == "bool":
		return "a boolean"
	}
	return "a " + v
}

// jsonTypeName names the JSON kind a Go type expects.
func jsonTypeName(e *json.UnmarshalTypeError) string {
	if e.Type == nil {
		return "another type"
	}
	switch e.Type.Kind().String() {
	case "string":
		return "a string"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number"
	case "float32", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	}
	return "another type"
}

// pathParam returns the URL parameter key, unescaped. The router matches on
// the escaped path whenever the request has one (so that %2F in an
// operation ID stays inside its segment); the parameter is then still
// escaped and is unescaped here. ok is false for an invalid escape.
func pathParam(r *http.Request, key string) (v string, ok bool) {
	v = chi.URLParam(r, key)
	if r.URL.RawPath == "" {
		return v, true
	}
	u, err := url.PathUnescape(v)
	if err != nil {
		return "", false
	}
	return u, true
}
