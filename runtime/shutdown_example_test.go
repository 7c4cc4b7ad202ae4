package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// A service that handles SIGTERM: on the signal it stops taking new
// locks, lets the work under way finish for up to 10 s, then cancels
// what is left and gives its locks back. (Here the work ends on its own,
// and the example sends itself no signal: stop plays its part.)
func ExampleClient_Shutdown() {
	c, done := exampleClient(nil)
	defer done()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	work := make(chan error, 1)
	held := make(chan struct{})
	go func() {
		work <- c.Mutex("report:2026", runtime.LockOptions{}).Do(context.Background(), func(ctx context.Context) error {
			close(held)
			time.Sleep(50 * time.Millisecond) // the work under way
			return nil
		})
	}()
	<-held
	stop() // as if SIGTERM arrived
	<-ctx.Done()

	grace, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.Shutdown(grace) // waits for the report, then closes the Client
	fmt.Println("shutdown:", err, "work:", <-work)

	_, err = c.Mutex("report:2027", runtime.LockOptions{}).TryLock(context.Background(), 0, runtime.Watchdog)
	fmt.Println("after:", errors.Is(err, runtime.ErrClosed) || errors.Is(err, runtime.ErrDraining))
	// Output:
	// shutdown: <nil> work: <nil>
	// after: true
}
