package synapse

import (
	"context"
	"testing"

	"github.com/testcontainers/testcontainers-go"
)

// RunForTest starts Synapse for a test and terminates it when the test ends. It skips the
// test, saying why, when no Docker engine answers; any other failure fails the test.
func RunForTest(t testing.TB, opts ...Option) *Container {
	t.Helper()
	skipWithoutEngine(t)
	ctx := context.Background()
	c, err := Run(ctx, opts...)
	if err != nil {
		t.Fatalf("starting synapse: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Terminate(context.Background()); err != nil {
			t.Errorf("%v", err)
		}
	})
	return c
}

// skipWithoutEngine skips t when no Docker engine answers.
func skipWithoutEngine(t testing.TB) {
	t.Helper()
	if tt, ok := t.(*testing.T); ok {
		testcontainers.SkipIfProviderIsNotHealthy(tt)
		return
	}
	// Benchmarks and fuzz targets: the same check SkipIfProviderIsNotHealthy makes.
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		t.Skipf("no Docker engine (start one with docker/engine.sh start): %v", err)
	}
	defer p.Close()
	if err := p.Health(context.Background()); err != nil {
		t.Skipf("no Docker engine answers (start one with docker/engine.sh start): %v", err)
	}
}
