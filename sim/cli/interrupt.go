package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interruptible returns a context that ends on the first SIGINT or SIGTERM,
// for a command that then winds down (a run of the features stops its
// scenarios and its Synapse container) and says so on stderr (what). After
// that first signal the default handling is back, so a second one quits at
// once. stop releases the signals and ends the goroutine that watches them;
// call it before returning.
func interruptible(stderr io.Writer, cmd, what string) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case sig := <-sigs:
			signal.Stop(sigs)
			fmt.Fprintf(stderr, "%s: %v: %s (again to quit at once)\n", cmd, sig, what)
			cancel()
		case <-quit:
		}
	})
	return ctx, func() {
		close(quit)
		wg.Wait()
		signal.Stop(sigs)
		cancel()
	}
}
