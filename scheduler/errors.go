package scheduler

import (
	"errors"
	"strings"
)

// Sentinel errors returned by the Store and the Service. Callers test them
// with errors.Is.
var (
	// ErrNotFound: no operation or scope by that name.
	ErrNotFound = errors.New("not found")
	// ErrConflict: an operation with that operationId exists with other
	// content.
	ErrConflict = errors.New("conflict")
	// ErrInvalidTransition: the operation's state does not allow the action.
	ErrInvalidTransition = errors.New("invalid transition")
	// ErrUnknownScope: an operation names a scope that does not exist.
	ErrUnknownScope = errors.New("unknown scope")
	// ErrIdentityInUse: another operation of the scope sends the same
	// request identity as its idempotency key, and the provider still
	// remembers it (see Store.Enqueue).
	ErrIdentityInUse = errors.New("request identity in use")
	// ErrStoreUnavailable: the store does not accept writes now (disk
	// full, read-only file, I/O error); what the call tried to write was
	// not written. Retry later.
	ErrStoreUnavailable = errors.New("store does not accept writes")
)

// FieldError names one invalid input field.
type FieldError struct {
	// Field is a JSON path such as "request.method" or "operations[3].providerScope".
	Field string `json:"field"`
	// Message says what is wrong and how to fix it.
	Message string `json:"message"`
}

// ValidationError lists the fields at fault in one input.
type ValidationError struct {
	Fields []FieldError
}

// Error implements error.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// add records one field error.
func (e *ValidationError) add(field, msg string) { e.Fields = append(e.Fields, FieldError{field, msg}) }

// names reports whether e already holds an error for field.
func (e *ValidationError) names(field string) bool {
	for _, f := range e.Fields {
		if f.Field == field {
			return true
		}
	}
	return false
}

// err returns e when it holds any field error, else nil.
func (e *ValidationError) err() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}

// ErrAccountLocked is returned for a sign-in to a staff account locked
// after MaxFailedSignIns failed sign-ins in a row, until it is unlocked.
var ErrAccountLocked = errors.New("account locked after too many failed sign-ins")

// MaxFailedSignIns is how many failed sign-ins in a row lock a staff
// account (design §14: pacer users unlock NAME lifts it).
const MaxFailedSignIns = 5

// Staff roles of the support page (design §14).
const (
	// RoleViewer sees everything a support person sees and acts on nothing.
	RoleViewer = "viewer"
	// RoleOperator sees and acts; the default.
	RoleOperator = "operator"
)
