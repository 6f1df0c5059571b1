package synapse

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/zooid-dev/zooid/internal/testdeps"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// RequestEnv names the variable that selects the test homeserver; the value
// "synapse" asks for a real Synapse.
const RequestEnv = "ZOOID_TEST_HOMESERVER"

// RunForTest starts Synapse for a test and terminates it when the test ends.
// Without a Docker engine it follows internal/testdeps' rule: left out with
// one line, or failed when the run asked for an engine (CI=true,
// ZOOID_TEST_DOCKER=1) or for Synapse (ZOOID_TEST_HOMESERVER=synapse). Any
// other failure fails the test.
func RunForTest(t testing.TB, opts ...Option) *Container {
	t.Helper()
	requireEngine(t)
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

// RequireEngine applies RunForTest's rule for a missing engine, for a test
// that starts Synapse through something other than RunForTest.
func RequireEngine(t testing.TB) {
	t.Helper()
	requireEngine(t)
}

// requireEngine goes on when a Docker engine answers. Asking for Synapse asks
// for the engine it runs in, so then a missing engine fails whatever
// internal/testdeps' rule says.
func requireEngine(t testing.TB) {
	t.Helper()
	engine := testdeps.DockerEngine
	engine.Probe = func() error { return engineHealth() }
	err, fail := engine.Missing()
	switch {
	case err == nil:
	case os.Getenv(RequestEnv) == "synapse":
		t.Fatalf("%s=synapse, but no Docker engine answers (start one with docker/engine.sh start): %v", RequestEnv, engine.Probe())
	case fail:
		t.Fatal(err)
	default:
		t.Skip(err)
	}
}

// engineHealth is the check testcontainers.SkipIfProviderIsNotHealthy makes;
// a variable so a test can stand in for a missing engine.
var engineHealth = func() error {
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	return p.Health(context.Background())
}

// RemoveImagesOnCleanup removes every image of repo when t ends, and fails t
// when one stays. Images built on one another go in passes, children first:
// the engine refuses to remove an image another is built on, forced or not,
// so a single pass over a chain of snapshots left its lower links behind.
func RemoveImagesOnCleanup(t testing.TB, repo string) {
	t.Cleanup(func() {
		if err := removeImages(context.Background(), repo); err != nil {
			t.Errorf("cleaning up the test images: %v", err)
		}
	})
}

func removeImages(ctx context.Context, repo string) error {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("connecting to the Docker engine: %w", err)
	}
	defer cli.Close()
	for {
		res, err := cli.ImageList(ctx, client.ImageListOptions{Filters: client.Filters{}.Add("reference", repo)})
		if err != nil {
			return fmt.Errorf("listing the images of %s: %w", repo, err)
		}
		if len(res.Items) == 0 {
			return nil
		}
		removed := 0
		var last error
		for _, img := range res.Items {
			if _, err := cli.ImageRemove(ctx, img.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
				last = err
				continue
			}
			removed++
		}
		if removed == 0 {
			return fmt.Errorf("removing the images of %s (%d left): %w", repo, len(res.Items), last)
		}
	}
}

// FederateForTest starts federating Synapses for a test (Federate, one element
// of servers each) and terminates them when it ends; a missing engine is
// handled as in RunForTest.
func FederateForTest(t testing.TB, servers ...[]Option) []*Container {
	t.Helper()
	requireEngine(t)
	cs, err := Federate(context.Background(), servers...)
	if err != nil {
		t.Fatalf("starting federating synapses: %v", err)
	}
	for _, c := range cs {
		t.Cleanup(func() {
			if err := c.Terminate(context.Background()); err != nil {
				t.Errorf("%v", err)
			}
		})
	}
	return cs
}
