package synapse

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// testLabel marks what one test created, so it cleans up only its own.
const testLabel = "dev.zooid.test"

func dockerClient(t *testing.T) *testcontainers.DockerClient {
	t.Helper()
	cli, err := testcontainers.NewDockerClientWithOpts(context.Background())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func baseImage() string {
	if ref := os.Getenv(ImageEnv); ref != "" {
		return ref
	}
	return DefaultImage
}

// idleContainer creates a container that only sleeps, with labels, and starts it
// when running is set; the test removes it at the end if it is still there.
func idleContainer(t *testing.T, cli *testcontainers.DockerClient, labels map[string]string, running bool) string {
	t.Helper()
	ctx := context.Background()
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: baseImage(), Entrypoint: []string{"sleep", "infinity"}, Labels: labels},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		t.Fatalf("creating a container: %v", err)
	}
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
	})
	if running {
		if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
			t.Fatalf("starting a container: %v", err)
		}
	}
	return c.ID
}

// exists says whether the engine still has container id.
func exists(t *testing.T, cli *testcontainers.DockerClient, id string) bool {
	t.Helper()
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{
		All: true, Filters: client.Filters{}.Add("id", id),
	})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	return len(res.Items) > 0
}

// endedProcess is an owner whose process has exited (and been reaped).
func endedProcess(t *testing.T, here owner) owner {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sleep: %v", err)
	}
	start, err := startTime(cmd.Process.Pid)
	if err != nil {
		t.Fatalf("start time of sleep: %v", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return owner{pid: cmd.Process.Pid, start: start, boot: here.boot, pidns: here.pidns}
}

// A container whose owner process has ended (or whose pid now belongs to another
// process) is removed when Run starts Synapse; one of a live owner, one whose owner
// can't be judged from here, and one without owner labels stay. The Synapse Run
// starts is labelled with this process, and a snapshot committed from it is not.
// (The same Synapse shows the start script's SQLite setting.)
func TestRunSweepsContainersOfEndedProcesses(t *testing.T) {
	requireEngine(t)
	here := selfOwner()
	if here.pid == 0 {
		t.Fatal("selfOwner: /proc does not describe this process")
	}
	cli := dockerClient(t)
	mark := fmt.Sprintf("sweep-%d-%d", os.Getpid(), time.Now().UnixNano())
	with := func(o owner) map[string]string {
		l := map[string]string{RoleLabel: "test-synapse", testLabel: mark}
		for k, v := range o.labels() {
			l[k] = v
		}
		return l
	}
	ended := endedProcess(t, here)
	reused := here
	reused.start = "1" // this pid, but a process started at another time
	elsewhere := ended
	elsewhere.boot = "another-boot"

	stale := idleContainer(t, cli, with(ended), true)
	staleStopped := idleContainer(t, cli, with(ended), false)
	staleReused := idleContainer(t, cli, with(reused), true)
	live := idleContainer(t, cli, with(here), true)
	unjudged := idleContainer(t, cli, with(elsewhere), true)
	unowned := idleContainer(t, cli, with(owner{}), true)

	hs := RunForTest(t)
	for _, id := range []string{stale, staleStopped, staleReused} {
		if exists(t, cli, id) {
			t.Errorf("container %.12s of an ended owner is still there after Run", id)
		}
	}
	for name, id := range map[string]string{"a live owner's": live, "another boot's": unjudged, "an unlabelled": unowned} {
		if !exists(t, cli, id) {
			t.Errorf("%s container %.12s was removed", name, id)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The start script's claim: SQLite runs without fsyncs (startScript).
	if log := hs.logTail(ctx); !strings.Contains(log, "zooid-start: sqlite synchronous=0") {
		t.Errorf("Synapse's log does not report sqlite synchronous=0 (OFF):\n%s", log)
	}
	mine, err := cli.ContainerInspect(ctx, hs.ctr.GetContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("inspecting Synapse's container: %v", err)
	}
	if got, ok := ownerOf(mine.Container.Config.Labels); !ok || got != here {
		t.Fatalf("Synapse's owner labels read %+v (ok %v), want this process %+v", got, ok, here)
	}
	removed, err := Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(removed, mine.Container.ID) {
		t.Fatal("Sweep removed the Synapse of this live process")
	}

	ref := "zooid-test-sweep:" + mark
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	// A label's value is written into a Dockerfile change, where the engine
	// would expand a $ (a Matrix event id's first character) and quotes.
	const odd = `{"long":"$ev-id_1","q":"a\"b\\c ${X}"}`
	if err := hs.Commit(ctx, ref, nil, map[string]string{RoleLabel: "test-synapse-snapshot", testLabel: odd}); err != nil {
		t.Fatal(err)
	}
	img, ok, err := InspectImage(ctx, ref)
	if err != nil || !ok {
		t.Fatalf("inspecting the committed image: ok %v, %v", ok, err)
	}
	if o, ok := ownerOf(img.Labels); ok {
		t.Fatalf("the snapshot names an owner, %+v: its containers would be swept as this process's", o)
	}
	if img.Labels[RoleLabel] != "test-synapse-snapshot" {
		t.Fatalf("snapshot role label = %q, want test-synapse-snapshot", img.Labels[RoleLabel])
	}
	if img.Labels[testLabel] != odd {
		t.Fatalf("snapshot label = %q, want %q", img.Labels[testLabel], odd)
	}
}

// PruneImages removes the images of a repository created before the one kept, and
// leaves the kept one, a newer one and an older one a container still uses.
func TestPruneImagesRemovesOlderOnes(t *testing.T) {
	requireEngine(t)
	cli := dockerClient(t)
	ctx := context.Background()
	repo := fmt.Sprintf("zooid-test-prune-%d", time.Now().UnixNano())
	RemoveImagesOnCleanup(t, repo)
	image := func(tag string) string {
		t.Helper()
		c := idleContainer(t, cli, map[string]string{testLabel: repo}, false)
		ref := repo + ":" + tag
		// A label of its own makes each a distinct image, created after the last.
		if _, err := cli.ContainerCommit(ctx, c, client.ContainerCommitOptions{Reference: ref, Changes: []string{fmt.Sprintf("LABEL %q=%q", testLabel, tag)}}); err != nil {
			t.Fatalf("committing %s: %v", ref, err)
		}
		return ref
	}
	old := image("old")
	inUse := image("in-use")
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: inUse}, HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		t.Fatalf("creating a container of %s: %v", inUse, err)
	}
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
	})
	keep := image("keep")
	newer := image("newer")

	removed, err := PruneImages(ctx, repo, keep)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{old}) {
		t.Fatalf("PruneImages removed %v, want only %s", removed, old)
	}
	for _, ref := range []string{inUse, keep, newer} {
		if _, ok, err := InspectImage(ctx, ref); err != nil || !ok {
			t.Errorf("%s is gone (%v)", ref, err)
		}
	}
	if _, ok, _ := InspectImage(ctx, old); ok {
		t.Errorf("%s is still there", old)
	}
}
