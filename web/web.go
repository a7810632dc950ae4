// Package web holds pacer's page templates and static assets, embedded in
// the binary. There is no build step: html/template files, plain CSS and
// a small script that only enhances pages which work without it.
//
// Every page template is a named template ("attention", "operation",
// "scope", "signin", "error") built from the partials in layout.html.
package web

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
)

//go:embed templates/*.html static
var files embed.FS

// Templates parses every page template. A template that does not parse
// stops the boot.
func Templates(funcs template.FuncMap) (*template.Template, error) {
	t, err := template.New("").Funcs(funcs).ParseFS(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("parse templates: %w", err)
	}
	return t, nil
}

// Static returns the static assets (CSS and script), served under
// /ui/static/.
func Static() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree always has "static"
	}
	return sub
}
