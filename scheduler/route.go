package scheduler

import "strings"

// Routes are what a scope learned of its provider's budgets (design §12):
// which resource's budget the requests of a route spend, keyed by route
// (RouteKeys). A route not in it spends the default budget (resource "").
type Routes map[string]string

// MaxExceptionRoutes bounds the whole-path routes a scope keeps (the
// first-segment ones are few by nature): past it the store forgets the
// oldest learned.
const MaxExceptionRoutes = 256

// RouteKeys are the two routes of a request: its method with the first
// segment of its path ("GET /search"), and its method with its whole path
// without the query ("GET /search/code"). The answer to one request
// teaches the first; a later answer that names another resource for a
// request under the same first segment teaches its whole path only.
func RouteKeys(method, path string) (prefix, whole string) {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	whole = method + " " + path
	first := path
	if i := strings.IndexByte(strings.TrimPrefix(path, "/"), '/'); i >= 0 {
		first = path[:i+1]
	}
	return method + " " + first, whole
}

// Resource is the resource whose budget a request of method and path
// spends: its whole path's route, else its first segment's, else the
// default ("").
func (r Routes) Resource(method, path string) string {
	prefix, whole := RouteKeys(method, path)
	if res, ok := r[whole]; ok {
		return res
	}
	return r[prefix]
}

// Learn records that the provider's answer to a request of method and path
// named resource, and returns the routes to set and to delete so that
// Resource(method, path) says resource: the first answer under a first
// segment teaches that segment; an answer that disagrees with its
// segment teaches its whole path, and one that agrees forgets a whole-path
// exception. Nothing changes when the routes already say resource.
func (r Routes) Learn(method, path, resource string) (set map[string]string, del []string) {
	if r.Resource(method, path) == resource {
		return nil, nil
	}
	prefix, whole := RouteKeys(method, path)
	segment, known := r[prefix]
	switch {
	case !known && resource == "":
		// The default needs no segment: forget the exception.
		return nil, []string{whole}
	case !known:
		set = map[string]string{prefix: resource}
		if _, ok := r[whole]; ok {
			del = []string{whole}
		}
		return set, del
	case segment == resource:
		return nil, []string{whole}
	}
	return map[string]string{whole: resource}, nil
}
