package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
)

// ProblemListener wraps l so that the requests net/http refuses before any
// handler sees them are answered with a problem document too, like every
// other error: a request line it cannot parse (a path with an invalid
// escape such as %ZZ), headers too large, an unsupported transfer
// encoding. net/http answers those itself with a plain-text body; the
// wrapper recognises exactly that answer (a status line followed at once
// by net/http's three error headers; an answer through a handler always
// carries a Date header among them) and rewrites it.
func ProblemListener(l net.Listener) net.Listener { return problemListener{l} }

type problemListener struct{ net.Listener }

func (l problemListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &problemConn{Conn: c}, nil
}

// problemConn rewrites net/http's own plain-text error answers.
type problemConn struct{ net.Conn }

// plainErrorHeaders is what net/http writes after the status line of an
// answer it gives without a handler (net/http's errorHeaders).
const plainErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c *problemConn) Write(p []byte) (int, error) {
	if out, ok := problemForPlainError(p); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// CloseWrite half-closes the connection when the wrapped one can, as
// net/http does before closing a connection it answered.
func (c *problemConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// problemForPlainError turns one whole plain-text error answer of
// net/http ("HTTP/1.1 400 Bad Request" + plainErrorHeaders + text) into
// the same status with a problem document; ok is false for anything else.
func problemForPlainError(p []byte) (out []byte, ok bool) {
	rest, found := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !found {
		return nil, false
	}
	statusLine, text, found := bytes.Cut(rest, []byte(plainErrorHeaders))
	if !found || bytes.ContainsAny(statusLine, "\r\n") || len(statusLine) < 3 {
		return nil, false
	}
	status, err := strconv.Atoi(string(statusLine[:3]))
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	detail := "the request could not be read: " + string(text)
	if status == http.StatusBadRequest {
		detail = "the request line or its headers are malformed; a path must be validly escaped (a literal % as %25, an operation ID's / as %2F)"
	}
	body, err := json.Marshal(newProblem(status, detail))
	if err != nil {
		return nil, false
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nCache-Control: no-store\r\nContent-Type: application/problem+json\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: %d\r\n\r\n",
		status, http.StatusText(status), len(body)+1)
	b.Write(body)
	b.WriteByte('\n')
	return b.Bytes(), true
}
