package steps

import (
	"context"
	"slices"
	"testing"
	"time"

	messages "github.com/cucumber/messages/go/v34"
)

func testPool(copies int) (*pool, *room) {
	rc := poolRecipe{Room: "#ops", Total: 40, Threads: 2, Senders: []string{"ori", "agent-a"}, Humans: []string{"ori"}, Pool: copies}
	p := &pool{recipes: []poolRecipe{rc}}
	for range copies {
		p.entries = append(p.entries, &pooled{poolEntry: &poolEntry{Recipe: 0}})
	}
	r := &room{name: "#ops", busy: &busySpec{total: 40, threads: 2, senders: []string{"ori", "agent-a"}}}
	return p, r
}

// A scenario gets a copy only when its room and humans match a recipe.
func TestPoolClaimMatchesRecipe(t *testing.T) {
	p, r := testPool(1)
	ctx := context.Background()
	if e, _ := p.claim(ctx, r, []string{"ori", "mia"}); e != nil {
		t.Fatal("claimed a copy for other humans")
	}
	other := &room{name: "#ops", busy: &busySpec{total: 41, threads: 2, senders: r.busy.senders}}
	if e, _ := p.claim(ctx, other, []string{"ori"}); e != nil {
		t.Fatal("claimed a copy for another history")
	}
	if e, _ := p.claim(ctx, &room{name: "#ops"}, []string{"ori"}); e != nil {
		t.Fatal("claimed a copy for a room without a history")
	}
	if e, rc := p.claim(ctx, r, []string{"ori"}); e == nil || rc.Total != 40 {
		t.Fatalf("no copy for the matching room: %v %v", e, rc)
	}
}

// A copy given back clean is claimed again; one given back changed is
// spent, and with every copy spent a scenario seeds by sending (nil) at once.
func TestPoolReusesCleanCopiesAndSpendsChangedOnes(t *testing.T) {
	p, r := testPool(1)
	ctx := context.Background()
	e, _ := p.claim(ctx, r, []string{"ori"})
	p.giveBack(e, true)
	again, _ := p.claim(ctx, r, []string{"ori"})
	if again != e {
		t.Fatal("a clean copy was not handed out again")
	}
	p.giveBack(again, false)
	done := make(chan *pooled, 1)
	go func() { e, _ := p.claim(ctx, r, []string{"ori"}); done <- e }()
	select {
	case got := <-done:
		if got != nil {
			t.Fatal("a spent copy was handed out")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("claim waited although every copy is spent")
	}
}

// While every matching copy is held, a claim waits for one to come back.
func TestPoolClaimWaitsForAHeldCopy(t *testing.T) {
	p, r := testPool(1)
	ctx := context.Background()
	held, _ := p.claim(ctx, r, []string{"ori"})
	done := make(chan *pooled, 1)
	go func() { e, _ := p.claim(ctx, r, []string{"ori"}); done <- e }()
	select {
	case <-done:
		t.Fatal("claim returned while the only copy was held")
	case <-time.After(50 * time.Millisecond):
	}
	p.giveBack(held, true)
	select {
	case got := <-done:
		if got != held {
			t.Fatalf("waiting claim got %v, want the copy given back", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiting claim never got the copy given back")
	}

	// A waiting claim gives up with its context.
	cctx, cancel := context.WithCancel(ctx)
	go func() { e, _ := p.claim(cctx, r, []string{"ori"}); done <- e }()
	cancel()
	select {
	case got := <-done:
		if got != nil {
			t.Fatal("a cancelled claim got a copy")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled claim kept waiting")
	}
}

// The key changes with what the snapshot holds: the image and the recipes.
func TestSnapshotKeyNamesWhatItHolds(t *testing.T) {
	p, _ := testPool(2)
	k := snapshotKey("sha256:a", p.recipes)
	if k != snapshotKey("sha256:a", p.recipes) {
		t.Fatal("the key is not stable")
	}
	if k == snapshotKey("sha256:b", p.recipes) {
		t.Fatal("another image, same key")
	}
	more := []poolRecipe{p.recipes[0]}
	more[0].Pool++
	if k == snapshotKey("sha256:a", more) {
		t.Fatal("another pool size, same key")
	}
}

// Only the busy rooms the run's features declare are built and started
// from: a run of other features starts a plain Synapse.
func TestNeededRecipesAreTheFeaturesBusyRooms(t *testing.T) {
	dir, err := FeaturesDir()
	if err != nil {
		t.Fatal(err)
	}
	got, err := neededRecipes([]string{dir}, poolRecipes)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(poolRecipes) {
		t.Fatalf("the features need %d of %d recipes; every recipe should be used by some feature", len(got), len(poolRecipes))
	}
	got, err = neededRecipes([]string{findPath("features/triggers.feature")}, poolRecipes)
	if err != nil || len(got) != 0 {
		t.Fatalf("triggers.feature needs %d recipes (err %v), want none", len(got), err)
	}
	got, err = neededRecipes([]string{findPath("features/mcp_paging.feature") + ":12"}, poolRecipes)
	if err != nil || len(got) != 1 || got[0].Total != 800 {
		t.Fatalf("mcp_paging.feature:12 needs %v (err %v), want the 800-message room", got, err)
	}
}

// Every scenario of the Synapse pass that seeds a snapshot's busy room finds a
// copy of its own, and no copy is built for none: one more scenario than
// copies seeds its 800 messages by sending, in CI's Synapse pass 21 s where a
// copy costs none, and a copy too many is 800 sends of every cold build.
func TestSnapshotHasACopyForEveryScenario(t *testing.T) {
	need := make([]int, len(poolRecipes))
	for _, pickles := range featurePickles(t) {
		for _, p := range pickles {
			if slices.ContainsFunc(p.Tags, func(tag *messages.PickleTag) bool { return tag.Name == "@fake-only" }) {
				continue
			}
			for _, st := range p.Steps {
				if i := busyRecipe(st.Text, poolRecipes); i >= 0 {
					need[i]++
					break
				}
			}
		}
	}
	for i, r := range poolRecipes {
		if need[i] == 0 {
			t.Errorf("no scenario seeds %s (%d messages in %d threads): the snapshot holds %d copies for none", r.Room, r.Total, r.Threads, r.Pool)
		}
		if r.Pool != need[i] {
			t.Errorf("%d scenarios seed %s (%d messages in %d threads), the snapshot holds %d copies: set its Pool to %d", need[i], r.Room, r.Total, r.Threads, r.Pool, need[i])
		}
	}
}
