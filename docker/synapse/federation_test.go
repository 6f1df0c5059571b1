package synapse_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/docker/synapse"
	"github.com/zooid-dev/zooid/internal/freeport"
)

// Two servers federate: a room made on one is joined from the other, and a
// message sent on either side arrives on the other, with its sender on the
// server it was sent from.
func TestTwoSynapsesFederate(t *testing.T) {
	cs := synapse.FederateForTest(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if a, b := cs[0].ServerName(), cs[1].ServerName(); a == b || !strings.HasPrefix(a, "localhost:") || !strings.HasPrefix(b, "localhost:") {
		t.Fatalf("server names %q and %q: want two different localhost:PORT", a, b)
	}
	alice := login(t, cs[0], "alice")
	bob := login(t, cs[1], "bob")

	room, err := alice.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{bob.UserID}})
	if err != nil {
		t.Fatalf("alice creates a room inviting %s: %v", bob.UserID, err)
	}
	if _, err := bob.JoinRoom(ctx, room.RoomID.String(), &mautrix.ReqJoinRoom{Via: []string{cs[0].ServerName()}}); err != nil {
		t.Fatalf("bob joins %s over federation: %v", room.RoomID, err)
	}
	if _, err := alice.SendText(ctx, room.RoomID, "hello from the first server"); err != nil {
		t.Fatalf("alice sends: %v", err)
	}
	got := waitForText(ctx, t, bob, room.RoomID, "hello from the first server")
	if got.Sender != alice.UserID {
		t.Errorf("bob saw the message from %s, want %s", got.Sender, alice.UserID)
	}
	if _, err := bob.SendText(ctx, room.RoomID, "and back from the second"); err != nil {
		t.Fatalf("bob sends: %v", err)
	}
	got = waitForText(ctx, t, alice, room.RoomID, "and back from the second")
	if got.Sender != bob.UserID {
		t.Errorf("alice saw the reply from %s, want %s", got.Sender, bob.UserID)
	}
}

// Federation is verified: a server whose certificate another CA issued is
// refused, so a join through it fails rather than trusting whatever answers.
func TestFederationRefusesAnotherCAsCertificate(t *testing.T) {
	synapse.RequireEngine(t)
	var cs []*synapse.Container
	for range 2 {
		ca, err := synapse.NewTestCA()
		if err != nil {
			t.Fatal(err)
		}
		port, err := freeport.Port()
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, synapse.RunForTest(t, synapse.WithFederation(ca, port)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alice := login(t, cs[0], "alice")
	bob := login(t, cs[1], "bob")
	room, err := alice.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bob.JoinRoom(ctx, room.RoomID.String(), &mautrix.ReqJoinRoom{Via: []string{cs[0].ServerName()}})
	if err == nil {
		t.Fatalf("bob joined %s through a server whose certificate his server does not trust", room.RoomID)
	}
	t.Logf("refused as it should be: %v", err)
}

func login(t *testing.T, c *synapse.Container, localpart string) *mautrix.Client {
	t.Helper()
	uid, token, err := c.RegisterUser(context.Background(), localpart, "password-"+localpart, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := id.NewUserID(localpart, c.ServerName()); uid != want {
		t.Fatalf("registered %s, want %s", uid, want)
	}
	cli, err := mautrix.NewClient(c.BaseURL(), uid, token)
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// waitForText syncs as cli until a message with body text arrives in room.
func waitForText(ctx context.Context, t *testing.T, cli *mautrix.Client, room id.RoomID, text string) *event.Event {
	t.Helper()
	since := ""
	for {
		resp, err := cli.SyncRequest(ctx, 10_000, since, "", false, event.PresenceOffline)
		if err != nil {
			t.Fatalf("%s waiting for %q: %v", cli.UserID, text, err)
		}
		since = resp.NextBatch
		if joined, ok := resp.Rooms.Join[room]; ok {
			for _, ev := range joined.Timeline.Events {
				if ev.Type != event.EventMessage {
					continue
				}
				if body, _ := ev.Content.Raw["body"].(string); body == text {
					return ev
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s never saw %q: %v", cli.UserID, text, fmt.Errorf("%w", ctx.Err()))
		}
	}
}
