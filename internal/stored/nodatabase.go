package stored

import "errors"

// ErrNoDatabase is returned, by either store, when a command other than
// serve names a database that holds no pacer database yet: only serve
// creates one.
var ErrNoDatabase = errors.New("only pacer serve creates a database; check --db")
