package router

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// ciBob is an agent of another daemon (workstation ci).
const ciBob id.UserID = "@ci.bob:example.org"

func agentState(room id.RoomID, eid id.EventID, user id.UserID, content string) *event.Event {
	return agentStateBy(room, eid, user, user, content)
}

// agentStateBy is a dev.zooid.agent state event about user, set by sender.
func agentStateBy(room id.RoomID, eid id.EventID, sender, user id.UserID, content string) *event.Event {
	ev := &event.Event{}
	js := `{"type":"dev.zooid.agent","state_key":"` + string(user) + `","event_id":"` + string(eid) + `","room_id":"` + string(room) + `","sender":"` + string(sender) + `","content":` + content + `}`
	if err := json.Unmarshal([]byte(js), ev); err != nil {
		panic(err)
	}
	ev.Type.Class = event.StateEventType
	return ev
}

// TestDecideOtherDaemonsAgents holds the decisions on posts of another
// daemon's agents (behaviour.md §9): known from their dev.zooid.agent state,
// they wake nobody here.
func TestDecideOtherDaemonsAgents(t *testing.T) {
	type step struct {
		ev    *event.Event
		want  Decision
		asked []string
	}
	cases := []struct {
		name  string
		facts fakeFacts
		steps []step
	}{
		{name: "another daemon's agent, once its dev.zooid.agent is seen, wakes nobody here, even an agent with trigger any; a person's bare reply after it goes to it, not to ours", steps: []step{
			{ev: msgEvent(roomOther, "$0", ciBob, "@agent-a before it was known", mentioning(userA)),
				want: Decision{Room: roomOther, Wakes: []Wake{
					wakeOf("agent-a", roomOther, "$0", "$0", ciBob, "before it was known", WhyMention),
					wakeOf("agent-c", roomOther, "$0", "$0", ciBob, "@agent-a before it was known", WhyTriggerAny)}}},
			{ev: agentState(roomOther, "$s", ciBob, `{"name":"bob","workstation":"ci"}`), want: Decision{Room: roomOther, Why: WhyNotMessage}},
			{ev: msgEvent(roomOther, "$1", ciBob, "@agent-a over to you", mentioning(userA)),
				want: Decision{Room: roomOther, Why: WhyAgentPost}},
			{ev: msgEvent(roomOther, "$2", alice, "@agent-a look", mentioning(userA)),
				want: Decision{Room: roomOther, Wakes: []Wake{
					wakeOf("agent-a", roomOther, "$2", "$2", alice, "look", WhyMention),
					wakeOf("agent-c", roomOther, "$2", "$2", alice, "@agent-a look", WhyTriggerAny)}}},
			{ev: msgEvent(roomOther, "$3", ciBob, "I'll take it", inThread("$2"), notice),
				want: Decision{Room: roomOther, Thread: "$2", Why: WhyAgentPost}},
			{ev: msgEvent(roomOther, "$4", alice, "thanks", inThread("$2")),
				want: Decision{Room: roomOther, Thread: "$2", Wakes: []Wake{
					wakeOf("agent-c", roomOther, "$2", "$4", alice, "thanks", WhyTriggerAny)}}},
			// Withdrawn (no name), it is a person again.
			{ev: agentState(roomOther, "$w", ciBob, `{}`), want: Decision{Room: roomOther, Why: WhyNotMessage}},
			{ev: msgEvent(roomOther, "$5", ciBob, "@agent-a hi", mentioning(userA)),
				want: Decision{Room: roomOther, Wakes: []Wake{
					wakeOf("agent-a", roomOther, "$5", "$5", ciBob, "hi", WhyMention),
					wakeOf("agent-c", roomOther, "$5", "$5", ciBob, "@agent-a hi", WhyTriggerAny)}}},
		}},
		{name: "a dev.zooid.agent set by someone else for a user marks nobody", steps: []step{
			{ev: agentStateBy(roomMain, "$s", alice, ciBob, `{"name":"bob"}`), want: Decision{Room: roomMain, Why: WhyNotMessage}},
			{ev: msgEvent(roomMain, "$1", ciBob, "@agent-a hi", mentioning(userA)),
				want: Decision{Room: roomMain, Wakes: []Wake{wakeOf("agent-a", roomMain, "$1", "$1", ciBob, "hi", WhyMention)}}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := New(testAgents())
			f := c.facts
			for i, s := range c.steps {
				f.asked = nil
				_, got := r.Decide(s.ev, &f)
				if !reflect.DeepEqual(got, s.want) {
					t.Errorf("step %d: decision\n%+v\nwant\n%+v", i, got, s.want)
				}
				if fmt.Sprint(f.asked) != fmt.Sprint(s.asked) {
					t.Errorf("step %d: asked %q, want %q", i, f.asked, s.asked)
				}
			}
		})
	}
}
