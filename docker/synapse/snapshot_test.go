package synapse

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"maunium.net/go/mautrix"
)

// FindOrBuildSnapshot builds a snapshot once and reuses it by its key; a
// changed recipe is another snapshot; a snapshot built on another keeps the
// one below it while older ones are pruned. The builds here commit an idle
// container (no Synapse): the function's contract is only that Build commits
// ref.
func TestFindOrBuildSnapshotBuildsOnceAndKeepsTheChain(t *testing.T) {
	requireEngine(t)
	cli := dockerClient(t)
	ctx := context.Background()
	repo := fmt.Sprintf("zooid-test-snapshot-%d", time.Now().UnixNano())
	RemoveImagesOnCleanup(t, repo)
	builds := map[string]int{} // by recipe
	find := func(base, recipe string) (string, bool) {
		t.Helper()
		ref, img, built, err := FindOrBuildSnapshot(ctx, base, SnapshotSpec{Repo: repo, Version: 1, Recipe: recipe,
			Build: func(ctx context.Context, from, ref string) error {
				if from != base {
					t.Errorf("Build got base %s, want %s", from, base)
				}
				builds[recipe]++
				c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
					Config:     &container.Config{Image: from, Entrypoint: []string{"sleep", "infinity"}},
					HostConfig: &container.HostConfig{NetworkMode: "none"},
				})
				if err != nil {
					return err
				}
				defer func() {
					_, _ = cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
				}()
				_, err = cli.ContainerCommit(ctx, c.ID, client.ContainerCommitOptions{Reference: ref,
					Changes: []string{fmt.Sprintf("LABEL %s=%s", dockerfileQuote(testLabel), dockerfileQuote(recipe))}})
				return err
			}}, t.Logf)
		if err != nil {
			t.Fatalf("snapshot of %s on %s: %v", recipe, base, err)
		}
		if !strings.HasPrefix(ref, repo+":") || img.ID == "" || img.Labels[testLabel] != recipe {
			t.Fatalf("snapshot of %s: ref %s, image %+v", recipe, ref, img)
		}
		return ref, built
	}
	a, built := find(baseImage(), "a")
	if !built || builds["a"] != 1 {
		t.Fatalf("first snapshot of a: built %v, %d builds; want a build", built, builds["a"])
	}
	if again, built := find(baseImage(), "a"); again != a || built || builds["a"] != 1 {
		t.Fatalf("second snapshot of a: %s (built %v, %d builds), want %s reused", again, built, builds["a"], a)
	}
	// Building b prunes a: older, and not below b.
	b, _ := find(baseImage(), "b")
	if b == a || builds["b"] != 1 {
		t.Fatalf("recipe b got %s (%d builds), want its own snapshot beside %s", b, builds["b"], a)
	}
	if _, ok, _ := InspectImage(ctx, a); ok {
		t.Errorf("%s is older than %s and not below it, and was not pruned", a, b)
	}
	// c is built on b: pruning after it keeps b, which c's key names.
	c, _ := find(b, "c")
	if _, ok, _ := InspectImage(ctx, b); !ok {
		t.Fatalf("building %s on %s removed %s", c, b, b)
	}
	if again, built := find(b, "c"); again != c || built || builds["c"] != 1 {
		t.Fatalf("second snapshot of c on b: %s (built %v, %d builds), want %s reused", again, built, builds["c"], c)
	}

	boom := errors.New("boom")
	_, _, _, err := FindOrBuildSnapshot(ctx, baseImage(), SnapshotSpec{Repo: repo, Version: 1, Recipe: "d",
		Build: func(context.Context, string, string) error { return boom }}, t.Logf)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "building the Synapse snapshot "+repo+":") {
		t.Fatalf("a failed build returned %v, want it wrapped with the snapshot's ref", err)
	}
	if _, _, _, err := FindOrBuildSnapshot(ctx, "zooid-test-no-such-image:x", SnapshotSpec{Repo: repo, Recipe: "a"}, t.Logf); err == nil || !strings.Contains(err.Error(), "no image zooid-test-no-such-image:x") {
		t.Fatalf("a missing base returned %v", err)
	}
}

// The key covers the base image, the version and the recipe.
func TestSnapshotKeyNamesWhatTheSnapshotHolds(t *testing.T) {
	k := func(img string, v int, r any) string {
		key, err := SnapshotKey(img, v, r)
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	a := k("sha256:a", 1, []int{1000})
	if a != k("sha256:a", 1, []int{1000}) || len(a) != 16 {
		t.Fatalf("key %q is not stable or not 16 hex digits", a)
	}
	for _, other := range []string{k("sha256:b", 1, []int{1000}), k("sha256:a", 2, []int{1000}), k("sha256:a", 1, []int{1000, 10000})} {
		if other == a {
			t.Fatalf("a changed image, version or recipe kept the key %s", a)
		}
	}
	if _, err := SnapshotKey("sha256:a", 1, func() {}); err == nil {
		t.Fatal("a recipe that does not encode gave a key")
	}
}

// A Synapse started from a snapshot gives SQLite's planner statistics of
// the snapshot's tables before it serves (startScript's PRAGMA optimize):
// without them SQLite plans Synapse's edits lookup as a scan of a room's
// events per event of a /messages page.
func TestSnapshotStartsWithPlannerStatistics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	hs := RunForTest(t)
	uid, tok, err := hs.RegisterUser(ctx, "snap", "pw-snap", false)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := mautrix.NewClient(hs.BaseURL(), uid, tok)
	if err != nil {
		t.Fatal(err)
	}
	room, err := cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := cli.SendText(ctx, room.RoomID, fmt.Sprintf("message %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	ref := fmt.Sprintf("zooid-test-snapshot-stats:%d", time.Now().UnixNano())
	t.Cleanup(func() {
		_, _ = dockerClient(t).ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	if err := hs.Commit(ctx, ref, nil, map[string]string{testLabel: "planner-statistics"}); err != nil {
		t.Fatal(err)
	}
	again := RunForTest(t, WithImage(ref))
	m := regexp.MustCompile(`zooid-start: sqlite synchronous=0, planner statistics for (\d+) tables`).FindAllStringSubmatch(again.logTail(ctx), -1)
	if len(m) == 0 {
		t.Fatalf("the snapshot's Synapse did not report its planner statistics:\n%s", again.logTail(ctx))
	}
	if n, _ := strconv.Atoi(m[0][1]); n < 10 {
		t.Fatalf("the snapshot's first connection reports statistics for %d tables, want those of Synapse's schema (dozens)", n)
	}
}
