package pgstore_test

import (
	"testing"

	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// The PostgreSQL store keeps the whole scheduler.Store contract.
func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) scheduler.Store { return openStore(t) })
}
