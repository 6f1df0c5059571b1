package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/internal/faultpoint"
	"github.com/zooid-dev/zooid/internal/netjail"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/e2ee"
)

// The catalogue's "Setting the scene" steps (area setup) and the step methods
// they run.

func setupSteps(w *world) []stepDef {
	return []stepDef{
		{area: "setup", pattern: `^agent processes stop after (\d+) seconds? idle$`,
			example: `agent processes stop after 1 second idle`,
			doc:     "Sets zooid.yaml idle_timeout (at least 1s, as zooid.yaml allows): a thread's agent process that waits that long for a turn is stopped.",
			fn:      w.stepIdleTimeout},
		{area: "setup", pattern: `^a turn times out after (\d+(?:\.\d+)?) seconds?$`,
			example: `a turn times out after 3 seconds`,
			doc:     "Sets the daemon's turn timeout (an agent's start-up stays bounded by the step wait); by default it is the step wait bound, so only a scenario about hung agents should need it.",
			fn:      w.stepTurnTimeout},
		{area: "setup", pattern: `^the homeserver has users? ` + quotedList + `$`,
			example: `the homeserver has users "ori" and "mia"`,
			doc:     "Registers human accounts; the first one creates the scenario's rooms.",
			fn:      w.stepUsers},
		{area: "setup", pattern: `^agents? ` + quotedList + ` (?:is|are) bound to ` + quotedList + `(?: with trigger (mention|any))?$`,
			example: `agents "agent-a" and "agent-b" are bound to "#ops" with trigger any`,
			doc:     "Configures agents in zooid.yaml, bound to those rooms; the trigger defaults to mention.",
			fn:      w.stepAgents},
		{area: "setup", pattern: `^"(#[a-z0-9-]+)" has (\d+) messages in (\d+) threads from ([a-z0-9, -]+)$`,
			example: `"#ops" has 800 messages in 40 threads from ori, mia, agent-a and agent-b`,
			doc:     "Gives a room a generated history: that many thread roots spread evenly, the rest alternating top-level chatter and replies to recent threads (imported on fakehs, sent on a real server).",
			fn:      w.stepBusyRoom},
		{area: "setup", pattern: `^the homeserver answers (every|the next \d+) (GET|PUT|POST) (/\S+?)(?: from ([a-z0-9-]+))? with (\d{3}) (M_[A-Z_]+)$`,
			example: `the homeserver answers the next 2 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a with 429 M_LIMIT_EXCEEDED`,
			doc:     "Programs a fault on the fake homeserver (path.Match pattern, * is one segment), optionally only for one user's requests; @fake-only.",
			fn:      w.stepFault},
		{area: "setup", pattern: `^the homeserver (has no /threads endpoint|bundles no aggregations|ignores relation filters|filters events after the page limit|serves history to non-members|shows new events (\d+) ms after their send)$`,
			example: `the homeserver filters events after the page limit`,
			doc:     "Turns on one way of doing less than Synapse on the fake homeserver (fakehs.Profile), for the rest of the scenario; fake-degraded runs have them all; @fake-only.",
			fn:      w.stepDegrade},
		{area: "setup", pattern: `^the homeserver was asked no (GET|PUT|POST) (/\S+)( as an agent)?$`,
			example: `the homeserver was asked no GET /_matrix/client/v1/rooms/*/relations/*/*`,
			doc:     "No request so far matched (path.Match pattern, * is one segment); with \"as an agent\", none the daemon made as one of the scenario's agents (people's requests, the harness's included, don't count); @fake-only. Checked after a tool result, the count is final.",
			fn: func(ctx context.Context, method, pattern, asAgent string) error {
				return w.stepAskedAtMost(ctx, method, pattern, 0, asAgent != "")
			}},
		{area: "setup", pattern: `^the homeserver was asked (GET|PUT|POST) (/\S+) at most (once|twice|\d+ times)( as an agent)?$`,
			example: `the homeserver was asked GET /_matrix/client/v3/rooms/*/event/* at most twice`,
			doc:     "At most that many requests so far matched (path.Match pattern, * is one segment), e.g. no polling for what cannot come; with \"as an agent\", only those the daemon made as one of the scenario's agents count; @fake-only. Checked after a tool result, the count is final.",
			fn: func(ctx context.Context, method, pattern, n, asAgent string) error {
				return w.stepAskedAtMost(ctx, method, pattern, times(n), asAgent != "")
			}},
		{area: "setup", pattern: `^([a-z0-9-]+) reacts (\d+) times to the last message of "(#[a-z0-9-]+)"$`,
			example: `ori reacts 600 times to the last message of "#ops"`,
			doc:     "A human sends that many m.reaction events (distinct keys) to the room's newest message (the scenario starts).",
			fn:      w.stepReactions},
		{area: "setup", pattern: `^([a-z0-9-]+) removes ([a-z0-9-]+) from "(#[a-z0-9-]+)"$`,
			example: `ori removes agent-b from "#ops"`,
			doc:     "A human kicks an agent out of a room (the daemon runs; the agent stays bound in zooid.yaml).",
			fn:      w.stepRemoves},
		{area: "setup", pattern: `^the homeserver itself serves the history of "(#[a-z0-9-]+)" to ([a-z0-9-]+)$`,
			example: `the homeserver itself serves the history of "#ops" to agent-b`,
			doc:     "Reads /messages of the room as the agent's own Matrix user, bypassing the daemon: the server answers, so a refusal by a tool comes from the daemon's own check.",
			fn:      w.stepServerServes},
		{area: "setup", pattern: `^the homeserver loses the next (\d+) encrypted to-device messages? for the agents' devices$`,
			example: `the homeserver loses the next 2 encrypted to-device messages for the agents' devices`,
			doc:     "Fake homeserver only: the next that many m.room.encrypted to-device messages (room keys, olm-encrypted) sent to an appservice user's device never reach the appservice, while the sender's request succeeds and it takes them as delivered, as Synapse loses them (a transaction it retried, element-hq/synapse#14710, or a notification handled after a later one's); the device's inbox (/sync as the device) still holds them.",
			fn:      w.stepLoseToDevice},
		{area: "setup", pattern: `^the homeserver drops the next (\d+) encrypted to-device messages? for the agents' devices, inbox and all$`,
			example: `the homeserver drops the next 2 encrypted to-device messages for the agents' devices, inbox and all`,
			doc:     "Fake homeserver only: the next that many m.room.encrypted to-device messages sent to an appservice user's device arrive nowhere, neither pushed nor kept in the device's inbox, while the sender's request succeeds: a key the sender's client never sent to these devices though it took them as served. \"the homeserver lost N to-device messages …\" counts them too.",
			fn:      w.stepDropToDevice},
		{area: "setup", pattern: `^the homeserver lost (\d+) to-device messages? on the way to the agents' devices$`,
			example: `the homeserver lost 2 to-device messages on the way to the agents' devices`,
			doc:     "Exactly that many to-device messages were lost by the last \"the homeserver loses (or drops) the next N encrypted to-device messages …\" (the fault fired).",
			fn:      w.stepLostToDevice},
		{area: "setup", pattern: `^the homeserver's last fault fired (once|twice|\d+ times)$`,
			example: `the homeserver's last fault fired twice`,
			doc:     "Waits until the most recently programmed fault has applied to that many requests, and checks it applied to no more. Every programmed fault is also checked when the scenario passes: a \"the next N\" fault must have fired N times, an \"every\" fault at least once.",
			fn:      func(ctx context.Context, n string) error { return w.stepFaultFired(ctx, times(n)) }},
		{area: "setup", pattern: `^([a-z0-9-]+) is still a member of "(#[a-z0-9-]+)", which zooid.yaml does not bind it to$`,
			example: `agent-a is still a member of "#old", which zooid.yaml does not bind it to`,
			doc:     "Starts the scenario, then joins the agent's Matrix user to the room (created if new) through the appservice, as a room removed from its binding leaves it.",
			fn:      w.stepStrayMember},
		{area: "setup", pattern: `^([a-z0-9-]+) is answering a mention in "(#[a-z0-9-]+)"$`,
			example: `agent-a is answering a mention in "#ops"`,
			doc:     "The first human mentions the agent top-level in the room and waits until it is prompted; that thread becomes the current one.",
			fn:      w.stepAnswering},

		// Task threads (behaviour §5). Tasks are named by a piece of their prompt;
		// their thread roots become threads the shared steps can name too ("ori
		// replies in the thread of "audit svc-a": …").
		{area: "setup", pattern: `^the daemon runs as its own process$`,
			example: `the daemon runs as its own process`,
			doc:     "Starts the scenario with the daemon as a child process of this executable (same config; a 60s turn timeout so hung agents stay hung), so it can be killed outright.",
			fn:      w.stepDaemonProcess},
		{area: "setup", pattern: `^"(#[a-z0-9-]+)" is end-to-end encrypted$`,
			example: `"#ops" is end-to-end encrypted`,
			doc:     "Declares a room created with m.room.encryption (m.megolm.v1.aes-sha2) in its initial state, as Element creates private rooms, before the daemon starts.",
			fn:      w.stepRoomEncrypted},
		{area: "setup", pattern: `^the daemon reads encrypted rooms$`,
			example: `the daemon reads encrypted rooms`,
			doc:     "Sets zooid.yaml encryption: true: each agent gets an end-to-end encryption device of its own (zooid/e2ee), decrypts what is sent to the room and encrypts what it posts there. An encrypted event whose key never comes is taken as undecryptable after 3 s on fakehs and the daemon's default 10 s on a real homeserver (zooid.yaml's room_key_wait). The scenario's whole log is kept from here on.",
			fn:      w.stepDaemonReadsEncrypted},
		{area: "setup", pattern: `^([a-z0-9-]+) has one end-to-end encryption device$`,
			example: `agent-a has one end-to-end encryption device`,
			doc:     "Asks the homeserver for the agent user's device keys (/keys/query, as the first human): exactly one device, with signed identity keys. The first time the step notes the device; every later time it must be the same device id with the same curve25519 and ed25519 keys (a restart kept them).",
			fn:      w.stepAgentOneDevice},
		{area: "setup", pattern: `^([a-z0-9-]+) sends (\d+) to-device messages to ([a-z0-9-]+)'s device$`,
			example: `ori sends 250 to-device messages to agent-a's device`,
			doc:     "The human sends that many to-device messages of a type no client acts on (`m.zooid.test`, one a request) to the agent's device, as key requests and room keys pile up in a busy room.",
			fn:      w.stepSendToDevice},
		{area: "setup", pattern: `^the homeserver keeps fewer than (\d+) to-device messages for ([a-z0-9-]+)'s device$`,
			example: `the homeserver keeps fewer than 100 to-device messages for agent-a's device`,
			doc:     "Waits until the homeserver keeps fewer than that many to-device messages in the agent device's inbox (sent to it and not read past with /sync): on fakehs counted exactly (`Server.ToDeviceKept`), on a real homeserver by a /sync from the start as the device, which shows at most 100 (so at most 100 here).",
			fn:      w.stepToDeviceKept},
		{area: "setup", pattern: `^(\d+) one-time keys of ([a-z0-9-]+)'s device are claimed$`,
			example: `45 one-time keys of agent-a's device are claimed`,
			doc:     "The first human claims that many signed_curve25519 one-time keys of the agent's device (/keys/claim, one a request, as people's devices do when they open an olm session with it); fails if the homeserver runs out first.",
			fn:      w.stepClaimAgentKeys},
		{area: "setup", pattern: `^([a-z0-9-]+)'s device has at least (\d+) one-time keys on the homeserver$`,
			example: `agent-a's device has at least 45 one-time keys on the homeserver`,
			doc:     "Waits until the homeserver counts at least that many signed_curve25519 one-time keys for the agent's device (asked as the device through the appservice, /keys/upload with nothing to upload).",
			fn:      w.stepAgentKeysAtLeast},
		{area: "setup", pattern: `^([a-z0-9-]+) has an end-to-end encryption device$`,
			example: `ori has an end-to-end encryption device`,
			doc:     "Gives the human's login a device with mautrix's own crypto (fakehs/e2eeclient; a harness built with -tags goolm): its device and one-time keys uploaded, its /sync taking room keys; from then on the human's encrypted messages are really encrypted, its room key shared with the room's devices, and the human can read encrypted messages back.",
			fn:      w.stepHumanDevice},
		{area: "setup", pattern: `^the daemon is (killed|stopped) and started again$`,
			example: `the daemon is killed and started again`,
			doc:     "SIGKILLs (killed) or SIGTERMs (stopped) the daemon's process group, agents included, and starts a new daemon on the same state dir, waiting until it is ready.",
			fn:      w.stepKillRestart},
		{area: "setup", pattern: `^the daemon is stopped$`,
			example: `the daemon is stopped`,
			doc:     "SIGTERMs the daemon's process group, agents included, and leaves it down: what happens in the rooms until it is started again reaches it only through what it reads at start.",
			fn:      w.stepStopDaemon},
		{area: "setup", pattern: `^the daemon is started again$`,
			example: `the daemon is started again`,
			doc:     "Starts a new daemon on the stopped one's state dir, waiting until it is ready.",
			fn:      w.stepStartDaemon},

		// Recorded rooms (scenarios/), sent in as history or played into the
		// daemon.
		{area: "setup", pattern: `^"(#[a-z0-9-]+)" is replayed from the recorded scenario "([^"]+)"$`,
			example: `"#ops" is replayed from the recorded scenario "svc-a-incident"`,
			doc:     "Gives a room the history of scenarios/<name>.json, or of a recording file by path (see scenarios/README.md): imported on fakehs, sent on a real server, before the daemon starts, so it is only read. The recording's agents are configured in the room with their trigger; other members the scenario has not declared become humans.",
			fn:      w.stepReplayed},
		{area: "setup", pattern: `^"(#[a-z0-9-]+)" is played from the recording "([^"]+)"$`,
			example: `"#ops" is played from the recording "svc-a-incident"`,
			doc:     "Declares a room that will live through a recording (a name in scenarios/ or a path): its agents configured with their rooms and trigger, its humans declared, the room empty until the recording is played into the running daemon.",
			fn:      w.stepPlayedFrom},
		{area: "setup", pattern: `^"(#[a-z0-9-]+)" is recorded as ([a-z0-9-]+) with its device$`,
			example: `"#ops" is recorded as agent-a with its device`,
			doc:     "Runs the recorder of `zooid record --decrypt` on the room as that agent's appservice user: its encrypted events are decrypted with the agent's device, opened from the daemon's state dir (e2ee.OpenReader), and marked decrypted; the next step checks the recording.",
			fn:      w.stepRecordWithDevice},
		{area: "setup", pattern: `^"(#[a-z0-9-]+)" is recorded as ([a-z0-9-]+)$`,
			example: `"#ops" is recorded as agent-a`,
			doc:     "Runs the recorder of `zooid record` on the room as that agent's appservice user (?user_id=), the scenario's agents named as agents; the next step checks the recording.",
			fn:      w.stepRecord},

		// The process caps: max_processes per agent and per daemon,
		// sessions_per_process, queue_notice_after.
		{area: "setup", pattern: `^([a-z0-9-]+) runs at most (\d+) process(?:es)?$`,
			example: `agent-a runs at most 3 processes`,
			doc:     "Sets the agent's zooid.yaml max_processes.",
			fn:      w.stepAgentMaxProcs},
		{area: "setup", pattern: `^([a-z0-9-]+) hosts up to (\d+) sessions per process$`,
			example: `agent-a hosts up to 10 sessions per process`,
			doc:     "Sets the agent's zooid.yaml sessions_per_process.",
			fn:      w.stepPerProc},
		{area: "setup", pattern: `^([a-z0-9-]+) hosts as many sessions per process as it can$`,
			example: `agent-a hosts as many sessions per process as it can`,
			doc:     "Sets the agent's zooid.yaml sessions_per_process to auto: several sessions a process if the agent advertises session/close, else one.",
			fn:      w.stepPerProcAuto},
		{area: "setup", pattern: `^([a-z0-9-]+) can close sessions$`,
			example: `agent-a can close sessions`,
			doc:     "The scripted agent advertises session/close (sessionCapabilities.close) when initialized.",
			fn:      w.stepCanCloseSessions},
		{area: "setup", pattern: `^([a-z0-9-]+) keeps a spare process$`,
			example: `agent-a keeps a spare process`,
			doc:     "Sets the agent's zooid.yaml prewarm: true: one process started and initialized before a thread needs it, counted against the caps.",
			fn:      w.stepPrewarm},
		{area: "setup", pattern: `^the daemon runs at most (\d+) agent processes$`,
			example: `the daemon runs at most 2 agent processes`,
			doc:     "Sets zooid.yaml max_processes: the cap on live agent processes across agents.",
			fn:      w.stepDaemonMaxProcs},
		{area: "setup", pattern: `^a turn waiting for an agent process is announced after (\d+) seconds?$`,
			example: `a turn waiting for an agent process is announced after 1 second`,
			doc:     "Sets zooid.yaml queue_notice_after (at least 1s, as zooid.yaml allows).",
			fn:      w.stepQueueNotice},

		// Agents reached over the plain HTTP transport (behaviour §7).
		{area: "setup", pattern: `^agent "([a-z0-9-]+)" is bound to HTTP$`,
			example: `agent "hook" is bound to HTTP`,
			doc:     "Configures an agent on the HTTP transport (POST /agents/{name}/sessions, answered as server-sent events) instead of Matrix.",
			fn:      w.stepHTTPAgent},

		// The daemon's flight recorder.
		{area: "setup", pattern: `^the daemon keeps a trace$`,
			example: `the daemon keeps a trace`,
			doc:     "Sets zooid.yaml trace.dir to a directory of the scenario: the daemon records per room what it saw and did.",
			fn:      w.stepKeepsTrace},

		// Recording a room with the daemon's trace and replaying it with `zooid
		// replay` on a fresh fake homeserver.
		{area: "setup", pattern: `^"(#[a-z0-9-]+)" is recorded with its trace as ([a-z0-9-]+)$`,
			example: `"#ops" is recorded with its trace as planner`,
			doc:     "Runs the recorder of `zooid record --trace` on the room as that agent's appservice user, once the trace has caught up (every event routed, every turn ended, every post seen back); later steps replay the recording.",
			fn:      w.stepRecordWithTrace},

		// The fake homeserver's misbehaviour beyond a plain error answer (the
		// "homeserver answers" step), and how the daemon retried.
		{area: "setup", pattern: `^the homeserver answers (every|the next \d+) (GET|PUT|POST) (/\S+?)(?: from ([a-z0-9-]+))? with 429 M_LIMIT_EXCEEDED, retry after (\d+) ms$`,
			example: `the homeserver answers the next 3 GET /_matrix/client/v3/rooms/*/messages from agent-a with 429 M_LIMIT_EXCEEDED, retry after 300 ms`,
			doc:     "Programs a rate limit on the fake homeserver whose answers carry that retry_after_ms (the plain 429 step asks for 20 ms); @fake-only.",
			fn:      w.stepRateLimit},
		{area: "setup", pattern: `^the homeserver drops (every|the next \d+) (GET|PUT|POST) (/\S+?)(?: from ([a-z0-9-]+))? (before|after) handling (?:it|them)$`,
			example: `the homeserver drops the next 2 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a after handling them`,
			doc:     "Programs dropped connections on the fake homeserver: before handling, the request is lost; after handling, its change is made and only the answer is lost (the client can't tell which); @fake-only.",
			fn:      w.stepDrop},
		{area: "setup", pattern: `^the homeserver holds (every|the next \d+) (GET|PUT|POST) (/\S+?)(?: from ([a-z0-9-]+))? (before|after) handling (?:it|them), never answering$`,
			example: `the homeserver holds the next 1 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a after handling it, never answering`,
			doc:     "Programs requests the fake homeserver accepts and never answers, until the client gives up: before handling, the request is lost; after handling, its change is made and only the answer never comes; @fake-only.",
			fn:      w.stepHold},
		{area: "setup", pattern: `^tool calls give up after (\d+) seconds?$`,
			example: `tool calls give up after 2 seconds`,
			doc:     "Sets zooid.yaml tool_timeout (at least 1s, as zooid.yaml allows): the deadline of one Zooid MCP tool call.",
			fn:      w.stepToolTimeout},
		{area: "setup", pattern: `^a post the homeserver leaves unanswered is tried again after (\d+) seconds?$`,
			example: `a post the homeserver leaves unanswered is tried again after 2 seconds`,
			doc:     "Sets zooid.yaml post_timeout (at least 1s): the deadline of one try of a post, after which it is tried again with the same txn id.",
			fn:      w.stepPostTimeout},
		{area: "setup", pattern: `^an encrypted message waits (\d+) seconds? for its room key$`,
			example: `an encrypted message waits 4 seconds for its room key`,
			doc:     "Sets zooid.yaml room_key_wait (1s to 2m; with the daemon reading encrypted rooms): how long an encrypted message waits for its room key before it is taken as undecryptable.",
			fn:      w.stepRoomKeyWait},
		{area: "setup", pattern: `^open tasks time out after (\d+) seconds?$`,
			example: `open tasks time out after 3 seconds`,
			doc:     "Sets zooid.yaml task_timeout (at least 1s, as zooid.yaml allows): a task still open that long after it was admitted closes timed_out, is reported once and frees its slot.",
			fn:      w.stepTaskTimeout},
		{area: "setup", pattern: `^the homeserver answers normally again$`,
			example: `the homeserver answers normally again`,
			doc:     "Removes every fault programmed so far; their hits stay counted for the checks.",
			fn:      w.stepFaultsCleared},
		{area: "setup", pattern: `^the daemon will be killed at its fault point "([a-z_.]+)"$`,
			example: `the daemon will be killed at its fault point "task.result_posted"`,
			doc:     "Arms a point of the daemon process (internal/faultpoint.Points: turn.closing_journaled, turn.reply_posted, task.result_posted, task.root_posted, handoff.posted, handoff.return_posted between a post and the journal write that records it; handoff.returned between the journal and the wake; task.adopting and handoff.adopting on receiving another daemon's task root or handoff notice, before journaling its adoption, task.adopted and handoff.adopted right after; turn.end_traced between the journal and the trace): the daemon SIGKILLs itself the next time it gets there.",
			fn:      w.stepArmFaultPoint},
		{area: "setup", pattern: `^the daemon dies at "([a-z_.]+)" and is started again$`,
			example: `the daemon dies at "task.result_posted" and is started again`,
			doc:     "Waits until the daemon process has killed itself at that armed point (its log says so), then starts a new daemon on the same state dir, waiting until it is ready.",
			fn:      w.stepDiesAtFaultPoint},
		{area: "setup", pattern: `^every request the homeserver refused was asked again (\d+) ms or more later$`,
			example: `every request the homeserver refused was asked again 300 ms or more later`,
			doc:     "Waits until every request a programmed fault applied to has been asked again (the same method and path), and checks each retry came at least that long after the refusal, by the fake homeserver's clock.",
			fn:      w.stepRetriedAfter},

		// Stopping the fake homeserver and starting it again on the same address
		// with its state, and having it push transactions again.
		{area: "setup", pattern: `^the homeserver stops until it has turned away (\d+) (GET|PUT|POST) (/\S+) from ([a-z0-9-]+)$`,
			example: `the homeserver stops until it has turned away 2 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a`,
			doc:     "Stops the fake homeserver as a process that went down (connections closed, each new request read and closed unanswered, appservice pushes paused) and has it start again by itself on the same address, with all its state, right after it turned away that many matching requests (fakehs StopUntil: exactly that many, however slow the run); @fake-only.",
			fn:      w.stepStopUntil},
		{area: "setup", pattern: `^the homeserver serves again on the same address with its state$`,
			example: `the homeserver serves again on the same address with its state`,
			doc:     "Waits until the stopped fake homeserver has started again, and checks each human's client, which has the address from before the stop, is answered there with its access token (the state is kept).",
			fn:      w.stepServesAgain},
		{area: "setup", pattern: `^the homeserver turned away (\d+) (GET|PUT|POST) (/\S+) from ([a-z0-9-]+)(?:, each the send of "([^"]*)" with its txn id)?$`,
			example: `the homeserver turned away 2 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a, each the send of "svc-a is up" with its txn id`,
			doc:     "Exactly that many matching requests were turned away while the homeserver was stopped; with a text, each was a send whose path ends in the txn id the agent's post of that text in the current thread landed with (so the retries kept one txn id and the post is the one retried).",
			fn:      w.stepTurnedAway},
		{area: "setup", pattern: `^the homeserver pushes again every transaction since "([^"]*)", with their txn ids$`,
			example: `the homeserver pushes again every transaction since "is svc-a up?", with their txn ids`,
			doc:     "Has the fake homeserver push to the daemon again every transaction already delivered from the one that carried the harness's message containing the text on, each with its own txn id, as a homeserver that lost the acknowledgements would; waits until the daemon has acknowledged all of them; @fake-only.",
			fn:      w.stepPushAgain},

		// Real agents: their adapters against the model double.
		{area: "setup", pattern: `^([a-z0-9, -]+?) runs? real (claude|gemini|codex|opencode|pi)$`,
			example: `claude1 runs real claude`,
			doc:     "Runs declared agents on that preset with its real adapter (the pinned packages of zooid/daemon/testdata/adapters; pi's, with the Node it needs, of zooid/piext/testdata/pi) and the default permission policy, their model API the scenario's model double, scripted by the `'s model will` steps; waits in such scenarios are 120 s.",
			fn:      w.stepRunsReal},
	}
}

func (w *world) stepIdleTimeout(secs string) error {
	if w.started {
		return fmt.Errorf("set the idle timeout before the first action starts the daemon")
	}
	f, err := strconv.ParseFloat(secs, 64)
	if err != nil {
		return fmt.Errorf("idle timeout %q: %w", secs, err)
	}
	w.idleTimeout = time.Duration(f * float64(time.Second))
	return nil
}

func (w *world) stepTurnTimeout(secs string) error {
	if w.started {
		return fmt.Errorf("set the turn timeout before the first action starts the daemon")
	}
	f, err := strconv.ParseFloat(secs, 64)
	if err != nil {
		return fmt.Errorf("turn timeout %q: %w", secs, err)
	}
	w.turnTimeout = time.Duration(f * float64(time.Second))
	return nil
}

func (w *world) stepUsers(ctx context.Context, list string) error {
	for _, n := range listOf(list) {
		if err := w.addHuman(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

func (w *world) stepAgents(ctx context.Context, list, rooms, trigger string) error {
	if w.started {
		return fmt.Errorf("agents must be declared before the first action (the daemon is already running)")
	}
	if err := w.ensureHomeserver(ctx); err != nil {
		return err
	}
	if trigger == "" {
		trigger = "mention"
	}
	rs := listOf(rooms)
	for _, r := range rs {
		if _, err := w.room(ctx, r); err != nil {
			return err
		}
	}
	for _, n := range listOf(list) {
		if err := checkName(n); err != nil {
			return err
		}
		if _, ok := w.humans[n]; ok {
			return fmt.Errorf("%q is already a human", n)
		}
		a, ok := w.agents[n]
		if !ok {
			a = &agentDecl{name: n}
			w.agents[n] = a
			w.agentSeq = append(w.agentSeq, n)
		}
		for _, r := range rs {
			if !slices.Contains(a.rooms, r) {
				a.rooms = append(a.rooms, r)
			}
		}
		a.trigger = trigger
	}
	return nil
}

func (w *world) stepRoomEncrypted(ctx context.Context, name string) error {
	if w.started {
		return fmt.Errorf("%s must be declared encrypted before the first action; in a running room: ori turns on encryption in %q", name, name)
	}
	r, err := w.room(ctx, name)
	if err != nil {
		return err
	}
	if r.busy != nil || r.replay != nil {
		return fmt.Errorf("%s: a generated or recorded room is not created encrypted", name)
	}
	r.encrypted = true
	return nil
}

func (w *world) stepBusyRoom(ctx context.Context, name, total, threads, senders string) error {
	if w.started {
		return fmt.Errorf("a busy room must be declared before the first action")
	}
	r, err := w.room(ctx, name)
	if err != nil {
		return err
	}
	t, _ := strconv.Atoi(total)
	th, _ := strconv.Atoi(threads)
	if t < 1 || th > t {
		return fmt.Errorf("%s: %d messages can't hold %d threads", name, t, th)
	}
	ss := bareList(senders)
	for _, s := range ss {
		if _, ok := w.humans[s]; ok {
			continue
		}
		if _, ok := w.agents[s]; ok {
			continue
		}
		return fmt.Errorf("sender %q of %s is neither a declared user nor an agent (declare them first)", s, name)
	}
	r.busy = &busySpec{total: t, threads: th, senders: ss}
	return nil
}

func (w *world) stepFault(ctx context.Context, count, method, path, who, status, errcode string) error {
	f := fakehs.Fault{Errcode: errcode}
	f.Status, _ = strconv.Atoi(status)
	if f.Status == 429 {
		f.RetryAfter = 20 * time.Millisecond
	}
	return w.programFault(ctx, count, method, path, who, f, status)
}

func (w *world) stepDegrade(ctx context.Context, what, delayMS string) error {
	if err := w.ensureHomeserver(ctx); err != nil {
		return err
	}
	return w.lease.hs.degrade(func(p *fakehs.Profile) {
		switch what {
		case "has no /threads endpoint":
			p.NoThreads = true
		case "bundles no aggregations":
			p.NoBundles = true
		case "ignores relation filters":
			p.IgnoreRelationFilters = true
		case "filters events after the page limit":
			p.FilterAfterLimit = true
		case "serves history to non-members":
			p.NonMembersRead = true
		default:
			ms, _ := strconv.Atoi(delayMS)
			p.VisibilityDelay = time.Duration(ms) * time.Millisecond
		}
	})
}

func (w *world) stepAskedAtMost(ctx context.Context, method, pattern string, most int, asAgent bool) error {
	if err := w.ensureHomeserver(ctx); err != nil {
		return err
	}
	var as []id.UserID
	who := ""
	if asAgent {
		as = []id.UserID{} // no agents: nothing counts
		for name := range w.agents {
			as = append(as, w.agentUser(name))
		}
		who = " as an agent"
	}
	n, err := w.lease.hs.requests(method, pattern, as)
	if err != nil {
		return err
	}
	if n > most {
		return fmt.Errorf("the homeserver was asked %s %s%s %d times, at most %d expected", method, pattern, who, n, most)
	}
	return nil
}

func (w *world) stepReactions(ctx context.Context, who string, n int, roomName string) error {
	h, r, err := w.humanIn(ctx, who, roomName)
	if err != nil {
		return err
	}
	// Page back unfiltered rather than ask for one filtered event: a server
	// that filters after the page limit (degraded fakehs) answers that with
	// nothing when the newest event is not a message, such as an agent's
	// join the daemon made a moment ago.
	var target id.EventID
	from := ""
	for target == "" {
		resp, err := h.cli.Messages(ctx, r.id, from, "", mautrix.DirectionBackward, nil, 50)
		if err != nil {
			return fmt.Errorf("finding the last message of %s: %w", roomName, err)
		}
		for _, ev := range resp.Chunk {
			if ev.Type == event.EventMessage {
				target = ev.ID
				break
			}
		}
		if target == "" && (resp.End == "" || len(resp.Chunk) == 0) {
			return fmt.Errorf("finding the last message of %s: the room has none", roomName)
		}
		from = resp.End
	}
	for i := range n {
		if _, err := h.cli.SendReaction(ctx, r.id, target, fmt.Sprintf("r%d", i)); err != nil {
			return fmt.Errorf("reaction %d to %s: %w", i, target, err)
		}
	}
	return nil
}

func (w *world) stepRemoves(ctx context.Context, who, agent, roomName string) error {
	h, r, err := w.humanIn(ctx, who, roomName)
	if err != nil {
		return err
	}
	if _, err := h.cli.KickUser(ctx, r.id, &mautrix.ReqKickUser{UserID: w.agentUser(agent), Reason: "test"}); err != nil {
		return fmt.Errorf("%s removing %s from %s: %w", who, agent, roomName, err)
	}
	return nil
}

func (w *world) stepServerServes(ctx context.Context, roomName, agent string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	r, err := w.room(ctx, roomName)
	if err != nil {
		return err
	}
	cli, err := mautrix.NewClient(w.lease.hs.baseURL(), w.agentUser(agent), w.lease.reg.AppToken)
	if err != nil {
		return err
	}
	cli.SetAppServiceUserID = true
	resp, err := cli.Messages(ctx, r.id, "", "", mautrix.DirectionBackward, nil, 5)
	if err != nil {
		return fmt.Errorf("the homeserver refused %s's read of %s itself: %w", agent, roomName, err)
	}
	if len(resp.Chunk) == 0 {
		return fmt.Errorf("the homeserver served %s an empty page of %s", agent, roomName)
	}
	return nil
}

func (w *world) stepLoseToDevice(ctx context.Context, n int) error {
	return w.armToDevice(ctx, "lose to-device messages", (*fakehs.Server).LoseToDevice, n)
}

func (w *world) stepDropToDevice(ctx context.Context, n int) error {
	return w.armToDevice(ctx, "drop to-device messages", (*fakehs.Server).DropToDevice, n)
}

// armToDevice arms a fakehs to-device fault on the next n encrypted
// to-device messages; "the homeserver lost N …" checks it fired.
func (w *world) armToDevice(ctx context.Context, what string, arm func(*fakehs.Server, string, int) func() int, n int) error {
	srv, err := w.fakeServer(ctx, what)
	if err != nil {
		return err
	}
	w.lostToDevice = arm(srv, event.ToDeviceEncrypted.Type, n)
	return nil
}

func (w *world) stepLostToDevice(ctx context.Context, n int) error {
	if w.lostToDevice == nil {
		return fmt.Errorf("no to-device message was to be lost: this step follows \"the homeserver loses (or drops) the next N encrypted to-device messages …\"")
	}
	if got := w.lostToDevice(); got != n {
		return fmt.Errorf("the homeserver lost %d to-device messages on the way to the agents' devices, want %d", got, n)
	}
	return nil
}

func (w *world) stepFaultFired(ctx context.Context, n int) error {
	if len(w.faults) == 0 {
		return fmt.Errorf("no fault has been programmed")
	}
	f := w.faults[len(w.faults)-1]
	err := w.eventually(ctx, fmt.Sprintf("the fault (%s) fires %d times", f.what, n), func() (bool, string, error) {
		got := f.handle.Hits()
		return got >= n, fmt.Sprintf("%d hits", got), nil
	})
	if err != nil {
		return err
	}
	if got := f.handle.Hits(); got != n {
		return fmt.Errorf("the fault (%s) fired %d times, want %d", f.what, got, n)
	}
	return nil
}

func (w *world) stepStrayMember(ctx context.Context, agent, roomName string) error {
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	if slices.Contains(a.rooms, roomName) {
		return fmt.Errorf("%s is bound to %s; a stray membership needs a room it is not bound to", agent, roomName)
	}
	if err := w.start(ctx); err != nil {
		return err
	}
	r, err := w.room(ctx, roomName)
	if err != nil {
		return err
	}
	cli, err := w.clientFor(ctx, w.agentUser(agent))
	if err != nil {
		return err
	}
	if _, err := cli.JoinRoom(ctx, string(r.id), nil); err != nil {
		return fmt.Errorf("%s joining %s outside zooid.yaml: %w", agent, roomName, err)
	}
	return nil
}

func (w *world) stepAnswering(ctx context.Context, agent, roomName string) error {
	if _, err := w.agent(agent); err != nil {
		return err
	}
	if err := w.start(ctx); err != nil {
		return err
	}
	w.stepSeq++
	text := fmt.Sprintf("@%s please take a look (%d)", agent, w.stepSeq)
	p, err := w.say(ctx, w.humanSeq[0], roomName, text, "", true)
	if err != nil {
		return err
	}
	return w.waitPrompted(ctx, agent, p.core)
}

func (w *world) stepDaemonProcess(ctx context.Context) error {
	return w.startAsProcess(ctx)
}

func (w *world) stepKillRestart(ctx context.Context, how string) error {
	p := w.tw().proc
	if p == nil {
		return fmt.Errorf("the daemon runs in-process; declare \"the daemon runs as its own process\" before the first action")
	}
	// The harness's own barrier turns end before the kill: only the
	// scenario's turns may be cut by it.
	if err := w.settleBarriers(ctx); err != nil {
		return err
	}
	sig := syscall.SIGKILL
	if how == "stopped" {
		sig = syscall.SIGTERM
	}
	if err := p.Stop(sig); err != nil {
		return err
	}
	return w.spawnDaemon(ctx)
}

func (w *world) stepStopDaemon(ctx context.Context) error {
	p := w.tw().proc
	if p == nil {
		return fmt.Errorf("the daemon runs in-process; declare \"the daemon runs as its own process\" before the first action")
	}
	if err := w.settleBarriers(ctx); err != nil {
		return err
	}
	return p.Stop(syscall.SIGTERM)
}

func (w *world) stepStartDaemon(ctx context.Context) error {
	if w.tw().proc == nil {
		return fmt.Errorf("the daemon runs in-process; declare \"the daemon runs as its own process\" before the first action")
	}
	return w.spawnDaemon(ctx)
}

func (w *world) stepReplayed(ctx context.Context, roomName, ref string) error {
	return w.recordedRoom(ctx, roomName, ref, false)
}

func (w *world) stepPlayedFrom(ctx context.Context, roomName, ref string) error {
	return w.recordedRoom(ctx, roomName, ref, true)
}

func (w *world) stepRecord(ctx context.Context, roomName, agent string) error {
	return w.record(ctx, roomName, agent, false)
}

func (w *world) stepRecordWithDevice(ctx context.Context, roomName, agent string) error {
	return w.recordWith(ctx, roomName, agent, false, true)
}

func (w *world) stepAgentMaxProcs(agent, n string) error {
	if err := w.beforeStart("max_processes"); err != nil {
		return err
	}
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	a.maxProcs, _ = strconv.Atoi(n)
	return nil
}

func (w *world) stepPerProc(agent, n string) error {
	if err := w.beforeStart("sessions_per_process"); err != nil {
		return err
	}
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	a.perProc, _ = strconv.Atoi(n)
	return nil
}

func (w *world) stepPerProcAuto(agent string) error {
	if err := w.beforeStart("sessions_per_process"); err != nil {
		return err
	}
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	a.perProc = config.SessionsPerProcessAuto
	return nil
}

func (w *world) stepCanCloseSessions(agent string) error {
	if err := w.beforeStart("the agent's capabilities"); err != nil {
		return err
	}
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	a.closeSessions = true
	return nil
}

func (w *world) stepPrewarm(agent string) error {
	if err := w.beforeStart("prewarm"); err != nil {
		return err
	}
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	a.prewarm = true
	return nil
}

func (w *world) stepDaemonMaxProcs(n string) error {
	if err := w.beforeStart("max_processes"); err != nil {
		return err
	}
	w.maxProcs, _ = strconv.Atoi(n)
	return nil
}

func (w *world) stepQueueNotice(secs string) error {
	return w.setSeconds("queue_notice_after", secs, &w.queueNotice)
}

func (w *world) stepHTTPAgent(ctx context.Context, name string) error {
	if w.started {
		return fmt.Errorf("agents must be declared before the first action (the daemon is already running)")
	}
	if err := checkName(name); err != nil {
		return err
	}
	if _, ok := w.agents[name]; ok {
		return fmt.Errorf("agent %q is already declared", name)
	}
	w.agents[name] = &agentDecl{name: name, http: true}
	w.agentSeq = append(w.agentSeq, name)
	return nil
}

func (w *world) stepKeepsTrace() error {
	if w.started {
		return fmt.Errorf("turn the trace on before the first action starts the daemon")
	}
	w.traceDir = filepath.Join(w.dir, "trace")
	return nil
}

func (w *world) stepRecordWithTrace(ctx context.Context, roomName, agent string) error {
	return w.record(ctx, roomName, agent, true)
}

func (w *world) stepRateLimit(ctx context.Context, count, method, path, who, ms string) error {
	n, err := strconv.Atoi(ms)
	if err != nil {
		return fmt.Errorf("retry after %q ms: %w", ms, err)
	}
	f := fakehs.Fault{Status: 429, Errcode: "M_LIMIT_EXCEEDED", RetryAfter: time.Duration(n) * time.Millisecond}
	return w.programFault(ctx, count, method, path, who, f, "429 retry after "+ms+" ms")
}

func (w *world) stepDrop(ctx context.Context, count, method, path, who, when string) error {
	f := fakehs.Fault{Drop: when == "before", DropResponse: when == "after"}
	return w.programFault(ctx, count, method, path, who, f, "dropped "+when+" handling")
}

func (w *world) stepHold(ctx context.Context, count, method, path, who, when string) error {
	f := fakehs.Fault{Hold: when == "before", HoldResponse: when == "after"}
	return w.programFault(ctx, count, method, path, who, f, "held "+when+" handling")
}

func (w *world) stepToolTimeout(secs string) error {
	return w.setSeconds("tool_timeout", secs, &w.toolTimeout)
}

func (w *world) stepRoomKeyWait(secs string) error {
	return w.setSeconds("room_key_wait", secs, &w.roomKeyWait)
}

func (w *world) stepPostTimeout(secs string) error {
	return w.setSeconds("post_timeout", secs, &w.postTimeout)
}

func (w *world) stepTaskTimeout(secs string) error {
	return w.setSeconds("task_timeout", secs, &w.taskTimeout)
}

func (w *world) stepFaultsCleared() error {
	if len(w.faults) == 0 {
		return errors.New("no fault has been programmed")
	}
	for _, f := range w.faults {
		f.handle.Clear()
	}
	return nil
}

func (w *world) stepArmFaultPoint(point string) error {
	if w.tw().proc == nil {
		return errors.New("fault points are in the daemon process: declare \"the daemon runs as its own process\" first")
	}
	if !slices.Contains(faultpoint.Points, point) {
		return fmt.Errorf("no fault point %q; the daemon has %v", point, faultpoint.Points)
	}
	return os.WriteFile(w.killFile(), []byte(point), 0o600)
}

func (w *world) stepDiesAtFaultPoint(ctx context.Context, point string) error {
	p := w.tw().proc
	if p == nil {
		return errors.New("the daemon runs in-process; declare \"the daemon runs as its own process\" first")
	}
	wctx, cancel := w.waitCtx(ctx)
	defer cancel()
	select {
	case <-p.Done():
	case <-wctx.Done():
		return fmt.Errorf("the daemon did not die at %s within %s: %s", point, w.run.wait, w.daemonLogTail())
	}
	log, err := os.ReadFile(p.LogPath())
	if err != nil {
		return fmt.Errorf("reading the daemon log: %w", err)
	}
	if !strings.Contains(string(log), "faultpoint: killed at "+point+"\n") {
		return fmt.Errorf("the daemon died, but not at %s: %s", point, w.daemonLogTail())
	}
	if _, err := os.Stat(w.killFile()); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the daemon died at %s but left the point armed (%v)", point, err)
	}
	return w.spawnDaemon(ctx)
}

func (w *world) stepRetriedAfter(ctx context.Context, ms string) error {
	n, err := strconv.Atoi(ms)
	if err != nil {
		return fmt.Errorf("%q ms: %w", ms, err)
	}
	least := time.Duration(n) * time.Millisecond
	if len(w.faults) == 0 {
		return errors.New("no fault has been programmed")
	}
	err = w.eventually(ctx, "every refused request is asked again", func() (bool, string, error) {
		for _, f := range w.faults {
			for _, h := range f.handle.Log() {
				if h.RetriedAt.IsZero() {
					return false, fmt.Sprintf("%s %s (fault %s) not asked again", h.Method, h.Path, f.what), nil
				}
			}
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	var errs []error
	hits := 0
	for _, f := range w.faults {
		for _, h := range f.handle.Log() {
			hits++
			if waited := h.RetriedAt.Sub(h.At); waited < least {
				errs = append(errs, fmt.Errorf("%s %s (fault %s) was asked again %v after the refusal, want %v or more", h.Method, h.Path, f.what, waited.Round(time.Millisecond), least))
			}
		}
	}
	if hits == 0 {
		return errors.New("no programmed fault has fired yet")
	}
	return errors.Join(errs...)
}

func (w *world) stepStopUntil(ctx context.Context, n int, method, path, agent string) error {
	srv, err := w.fakeServer(ctx, "be stopped")
	if err != nil {
		return err
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	return srv.StopUntil(fakehs.Fault{Method: method, PathPattern: path, User: w.agentUser(agent)}, n)
}

func (w *world) stepServesAgain(ctx context.Context) error {
	srv, err := w.fakeServer(ctx, "be restarted")
	if err != nil {
		return err
	}
	wctx, cancel := w.waitCtx(ctx)
	defer cancel()
	if err := srv.AwaitRestart(wctx); err != nil {
		return fmt.Errorf("%w; turned away so far: %s", err, turnedAway(srv.TurnedAwayRequests()))
	}
	// The humans' clients still have the address from before the stop.
	if len(w.humans) == 0 {
		return errors.New("no human to check the restarted homeserver with; declare one first")
	}
	for _, h := range w.humans {
		who, err := h.cli.Whoami(ctx)
		if err != nil {
			return fmt.Errorf("%s's access token at %s after the restart: %w", h.name, h.cli.HomeserverURL, err)
		}
		if who.UserID != h.id {
			return fmt.Errorf("%s's access token is %s's after the restart", h.name, who.UserID)
		}
	}
	return nil
}

func (w *world) stepTurnedAway(ctx context.Context, n int, method, path, agent, text string) error {
	srv, err := w.fakeServer(ctx, "turn requests away")
	if err != nil {
		return err
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	uid := w.agentUser(agent)
	m := fakehs.Fault{Method: method, PathPattern: path, User: uid}
	all := srv.TurnedAwayRequests()
	var got []fakehs.TurnedAway
	for _, r := range all {
		if r.Matches(m) {
			got = append(got, r)
		}
	}
	if len(got) != n {
		return fmt.Errorf("the homeserver turned away %d %s %s from %s, want %d; all it turned away: %s", len(got), method, path, agent, n, turnedAway(all))
	}
	if text == "" {
		return nil
	}
	txn, err := w.postTxnID(ctx, agent, text)
	if err != nil {
		return err
	}
	for _, r := range got {
		if !strings.HasSuffix(r.Path, "/"+txn) {
			return fmt.Errorf("turned away %s %s, want the send with txn id %s that %q landed with; all it turned away: %s", r.Method, r.Path, txn, text, turnedAway(all))
		}
	}
	return nil
}

func (w *world) stepPushAgain(ctx context.Context, text string) error {
	srv, err := w.fakeServer(ctx, "push transactions again")
	if err != nil {
		return err
	}
	var since id.EventID
	for i := len(w.posts) - 1; i >= 0 && since == ""; i-- {
		if strings.Contains(w.posts[i].text, text) {
			since = w.posts[i].id
		}
	}
	if since == "" {
		return fmt.Errorf("no message of the harness contains %q", text)
	}
	before := srv.Repushed(w.lease.reg.ID)
	n, err := srv.Repush(w.lease.reg.ID, since)
	if err != nil {
		return err
	}
	return w.eventually(ctx, fmt.Sprintf("the daemon acknowledges the %d transactions pushed again", n), func() (bool, string, error) {
		got := srv.Repushed(w.lease.reg.ID) - before
		return got == n, fmt.Sprintf("%d of %d acknowledged", got, n), nil
	})
}

func (w *world) stepRunsReal(list, preset string) error {
	rp, ok := realPresets[preset]
	if !ok {
		return fmt.Errorf("no model double wiring for the %s preset yet", preset)
	}
	command, _ := config.ACP{Preset: preset}.Resolve()
	root, err := repoPackage(rp.pkg, command)
	if err != nil {
		return err
	}
	agents, err := w.matrixAgents(list)
	if err != nil {
		return err
	}
	md, err := w.modelDouble()
	if err != nil {
		return err
	}
	for _, a := range agents {
		n := a.name
		home := filepath.Join(w.dir, "home", n)
		if err := os.MkdirAll(home, 0o700); err != nil {
			return err
		}
		env, err := rp.wire(md, wireTarget{agent: n, home: home, stateDir: w.stateDir()})
		if err != nil {
			return fmt.Errorf("pointing %s's %s at the model double: %w", n, preset, err)
		}
		env["HOME"] = home
		var bins []string
		for _, b := range adapterBins {
			bins = append(bins, filepath.Join(root, b))
		}
		path := strings.Join(append(bins, os.Getenv("PATH")), string(os.PathListSeparator))
		jailed := netjail.Supported()
		if jailed {
			shims, err := w.jailShim(n, command, path, strings.TrimPrefix(md.URL(), "http://"))
			if err != nil {
				return fmt.Errorf("jailing %s: %w", n, err)
			}
			path = shims + string(os.PathListSeparator) + path
		}
		env["PATH"] = path
		a.real = &realAgent{preset: preset, home: home, env: env}
	}
	// Real agents take seconds to start; the scripted agent's 10 s turn
	// timeout would cut them off.
	w.turnTimeout = max(w.turnTimeout, realWait)
	return nil
}

// lateKeyWait is the scenario's room_key_wait, how long the daemon under test
// waits for an encrypted event's room key before it says the event is
// undecryptable (in-process or as its own process): the scenario's own
// ("an encrypted message waits …"), else 3 s
// on fakehs, which pushes a key at once (a key held back never comes), and
// the daemon's own default on a real homeserver, where a loaded Synapse has
// pushed a room key more than 3 s after its message (a Synapse pass of
// 2026-12-05; the daemon now logs such a key, "the daemon logs …").
func (w *world) lateKeyWait() time.Duration {
	if w.roomKeyWait > 0 {
		return w.roomKeyWait
	}
	if w.run.backend.kind() == "fake" {
		return 3 * time.Second
	}
	return e2ee.DefaultLateKeyWait
}

func (w *world) stepDaemonReadsEncrypted() error {
	if err := w.beforeStart("encryption"); err != nil {
		return err
	}
	w.encryption = true
	// "no secret appears in the daemon's log" reads all of it.
	w.logs.keepWhole()
	return nil
}

func (w *world) stepHumanDevice(ctx context.Context, name string) error {
	h, err := w.human(name)
	if err != nil {
		return err
	}
	if h.dev != nil {
		return nil
	}
	dev, err := newHumanDevice(ctx, w.lease.hs.baseURL(), h.id, h.cli.AccessToken, w.log)
	if err != nil {
		return err
	}
	h.dev = dev
	w.closers = append(w.closers, dev.Close)
	return nil
}

func (w *world) stepAgentOneDevice(ctx context.Context, agent string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	uid := w.agentUser(agent)
	reader := w.humans[w.humanSeq[0]]
	resp, err := reader.cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: mautrix.DeviceKeysRequest{uid: {}}})
	if err != nil {
		return fmt.Errorf("asking for %s's device keys: %w", agent, err)
	}
	devices := resp.DeviceKeys[uid]
	if len(devices) != 1 {
		ids := make([]string, 0, len(devices))
		for d := range devices {
			ids = append(ids, string(d))
		}
		slices.Sort(ids)
		return fmt.Errorf("%s has %d devices with keys, want exactly 1: %v", agent, len(devices), ids)
	}
	var got *id.Device
	for devID, keys := range devices {
		got = &id.Device{UserID: uid, DeviceID: devID, IdentityKey: keys.Keys.GetCurve25519(devID), SigningKey: keys.Keys.GetEd25519(devID)}
	}
	if got.IdentityKey == "" || got.SigningKey == "" {
		return fmt.Errorf("%s's device %s has no curve25519 or ed25519 key: %+v", agent, got.DeviceID, devices[got.DeviceID].Keys)
	}
	if w.agentDevices == nil {
		w.agentDevices = map[string]*id.Device{}
	}
	was := w.agentDevices[agent]
	if was == nil {
		w.agentDevices[agent] = got
		return nil
	}
	if *was != *got {
		return fmt.Errorf("%s's device is %s (identity key %s), but was %s (identity key %s): its keys were not kept", agent, got.DeviceID, got.IdentityKey, was.DeviceID, was.IdentityKey)
	}
	return nil
}

// agentDevice is the agent's user and its one device, as the homeserver
// lists its keys; it starts the daemon, which makes the device.
func (w *world) agentDevice(ctx context.Context, agent string) (id.UserID, id.DeviceID, error) {
	if err := w.start(ctx); err != nil {
		return "", "", err
	}
	uid := w.agentUser(agent)
	resp, err := w.humans[w.humanSeq[0]].cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: mautrix.DeviceKeysRequest{uid: {}}})
	if err != nil {
		return "", "", fmt.Errorf("asking for %s's device keys: %w", agent, err)
	}
	if len(resp.DeviceKeys[uid]) != 1 {
		return "", "", fmt.Errorf("%s has %d devices with keys, want 1", agent, len(resp.DeviceKeys[uid]))
	}
	for dev := range resp.DeviceKeys[uid] {
		return uid, dev, nil
	}
	return "", "", nil
}

func (w *world) stepSendToDevice(ctx context.Context, who string, n int, agent string) error {
	h, err := w.human(who)
	if err != nil {
		return err
	}
	uid, dev, err := w.agentDevice(ctx, agent)
	if err != nil {
		return err
	}
	typ := event.Type{Type: "m.zooid.test", Class: event.ToDeviceEventType}
	for i := range n {
		req := &mautrix.ReqSendToDevice{Messages: map[id.UserID]map[id.DeviceID]*event.Content{
			uid: {dev: {Raw: map[string]any{"n": i}}},
		}}
		if _, err := h.cli.SendToDevice(ctx, typ, req); err != nil {
			return fmt.Errorf("%s sending to-device message %d of %d to %s's device: %w", who, i+1, n, agent, err)
		}
	}
	return nil
}

func (w *world) stepToDeviceKept(ctx context.Context, below int, agent string) error {
	uid, dev, err := w.agentDevice(ctx, agent)
	if err != nil {
		return err
	}
	kept, err := w.toDeviceKept(uid, dev, below)
	if err != nil {
		return err
	}
	return w.eventually(ctx, fmt.Sprintf("the homeserver keeping fewer than %d to-device messages for %s's device", below, agent), func() (bool, string, error) {
		n, err := kept(ctx)
		if err != nil {
			return false, "", err
		}
		return n < below, fmt.Sprintf("%d kept", n), nil
	})
}

// inboxPage is how many to-device messages Synapse gives in one /sync.
const inboxPage = 100

// toDeviceKept counts the to-device messages the homeserver keeps for the
// device: on fakehs exactly (Server.ToDeviceKept); on a real homeserver, up
// to inboxPage, by a /sync from the start as the device (the appservice
// masquerading as it, as the daemon reads its inbox), which drops nothing.
// Each such look asks with another timeout, which the homeserver ignores for
// a /sync from the start: Synapse answers a repeated non-empty /sync from a
// cache for two minutes, keyed by its parameters.
func (w *world) toDeviceKept(uid id.UserID, dev id.DeviceID, below int) (func(context.Context) (int, error), error) {
	if f, ok := w.lease.hs.(fakeHS); ok {
		return func(context.Context) (int, error) { return f.srv.ToDeviceKept(uid, dev), nil }, nil
	}
	if below > inboxPage {
		return nil, fmt.Errorf("a real homeserver shows at most %d to-device messages a /sync: count below %d at most", inboxPage, inboxPage)
	}
	cli, err := mautrix.NewClient(w.lease.hs.baseURL(), uid, w.lease.reg.AppToken)
	if err != nil {
		return nil, err
	}
	cli.SetAppServiceUserID, cli.DeviceID, cli.SetAppServiceDeviceID = true, dev, true
	look := 0
	return func(ctx context.Context) (int, error) {
		look++
		resp, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{Timeout: look, FilterID: e2ee.InboxFilter})
		if err != nil {
			return 0, fmt.Errorf("reading %s's device's inbox as it: %w", uid, err)
		}
		return len(resp.ToDevice.Events), nil
	}, nil
}

func (w *world) stepClaimAgentKeys(ctx context.Context, n, agent string) error {
	uid, dev, err := w.agentDevice(ctx, agent)
	if err != nil {
		return err
	}
	count, _ := strconv.Atoi(n)
	cli := w.humans[w.humanSeq[0]].cli
	for i := range count {
		resp, err := cli.ClaimKeys(ctx, &mautrix.ReqClaimKeys{OneTimeKeys: mautrix.OneTimeKeysRequest{uid: {dev: id.KeyAlgorithmSignedCurve25519}}})
		if err != nil {
			return fmt.Errorf("claiming %s's one-time key %d: %w", agent, i+1, err)
		}
		if len(resp.OneTimeKeys[uid][dev]) == 0 {
			return fmt.Errorf("%s's device had only %d one-time keys to claim, want %d", agent, i, count)
		}
	}
	return nil
}

func (w *world) stepAgentKeysAtLeast(ctx context.Context, agent, n string) error {
	uid, dev, err := w.agentDevice(ctx, agent)
	if err != nil {
		return err
	}
	want, _ := strconv.Atoi(n)
	cli, err := mautrix.NewClient(w.lease.hs.baseURL(), uid, w.lease.reg.AppToken)
	if err != nil {
		return err
	}
	cli.SetAppServiceUserID, cli.DeviceID, cli.SetAppServiceDeviceID = true, dev, true
	return w.eventually(ctx, fmt.Sprintf("%s's device to have %d one-time keys", agent, want), func() (bool, string, error) {
		resp, err := cli.UploadKeys(ctx, &mautrix.ReqUploadKeys{})
		if err != nil {
			return false, "", fmt.Errorf("asking for %s's one-time key count: %w", agent, err)
		}
		got := resp.OneTimeKeyCounts.SignedCurve25519
		return got >= want, fmt.Sprintf("%d one-time keys", got), nil
	})
}
