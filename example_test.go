package lockgen_test

import (
	"fmt"

	"github.com/lockgen/lockgen"
)

// Parse reports every problem of a spec at once, each with its position,
// the field, and how to fix it.
func ExampleParse() {
	spec := []byte(`version: 1
package: locks
locks:
  OrderLock:
    key: "order:${orderId}"
    params: {orderID: int64}
    lease: 30
    waittime: 3s
`)
	_, err := lockgen.Parse("locks.yaml", spec)
	fmt.Println(err)
	// Output:
	// locks.yaml:5:17: locks.OrderLock.key: placeholder ${orderId} is not a declared param (did you mean ${orderID}?)
	// locks.yaml:6:14: locks.OrderLock.params.orderID: param "orderID" is not used in key (add ${orderID} to the key, or remove the param)
	// locks.yaml:7:12: locks.OrderLock.lease: "30" is not a duration (add a unit: 30s or 30ms)
	// locks.yaml:8:5: locks.OrderLock.waittime: unknown field "waittime" (did you mean "waitTime"?)
}

// A valid spec becomes a model with the defaults applied.
func ExampleParse_defaults() {
	spec, err := lockgen.Parse("locks.yaml", []byte(`version: 1
package: locks
locks:
  OrderLock:
    key: "order:${orderID}"
    params: {orderID: int64}
`))
	if err != nil {
		panic(err)
	}
	l := spec.Locks[0]
	fmt.Println(l.Name, l.Kind, l.Key.Text, l.Params[0].Type, l.Lease, l.WaitTime, spec.Output)
	// Output: OrderLock reentrant order:${orderID} int64 watchdog 5s locks_gen.go
}
