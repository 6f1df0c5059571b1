// Package router holds Zooid's routing rules (behaviour.md §2 and the task-thread dispatch
// of §5): which agents a Matrix message wakes, on which thread, and the per-thread memory
// of who is being addressed. Decide turns one inbound event into a Decision value, which
// the daemon carries out and the trace records. The router does no I/O itself: what it
// needs from the task journal and the room's history it asks of Facts. It is safe for
// concurrent use.
package router

import (
	"container/list"
	"slices"
	"strings"
	"sync"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// Trigger says what wakes an agent outside threads it is already in.
type Trigger string

// Triggers.
const (
	// Mention wakes the agent when it is mentioned (the default; "" means Mention).
	Mention Trigger = "mention"
	// Any wakes the agent on every human message in its rooms, except inside task threads.
	Any Trigger = "any"
)

// Agent is the routing view of one configured agent.
type Agent struct {
	Name        string
	UserID      id.UserID
	DisplayName string
	Rooms       []id.RoomID
	Trigger     Trigger
	// Workstation is its daemon's workstation ("" none): the agent is then
	// addressed in text as @name and @workstation.name too.
	Workstation string
}

// Wake is one agent to prompt with one message, in its session (Agent, Room, ThreadRoot).
type Wake struct {
	Agent string
	Room  id.RoomID
	// ThreadRoot is the session's thread: the message itself when it is top-level.
	ThreadRoot id.EventID
	// Text is the body with the agent's own mention stripped.
	Text    string
	EventID id.EventID
	Sender  id.UserID
	// Why names the rule that woke the agent (one of the Why* constants).
	Why string
}

// Why an agent woke: the rule of §2 or §5 that applied.
const (
	WhyMention      = "mention"
	WhyTriggerAny   = "trigger_any"
	WhyAddressee    = "addressee"
	WhyTaskAssignee = "task_assignee"
)

// ThreadInfo is what the router remembers of one thread.
type ThreadInfo struct {
	Room id.RoomID
	Root id.EventID
	// Task is set for task threads (their root carried dev.zooid.thread_start).
	Task     bool
	Assignee string
	// Addressees get the next bare human reply.
	Addressees []string
}

// DefaultThreadMemory is how many threads the router remembers.
const DefaultThreadMemory = 10_000

// Router applies the routing rules for a fixed set of agents.
type Router struct {
	agents []*agentInfo
	byUser map[id.UserID]*agentInfo
	byName map[string]*agentInfo

	mu sync.Mutex
	// others are the Zooid agents of other daemons, per room, as their
	// dev.zooid.agent state events say (Decide, LearnAgents): their posts are
	// agent prose, which wakes nobody here.
	others   map[id.RoomID]map[id.UserID]zevent.AgentContent
	threads  map[threadKey]*list.Element
	lru      *list.List // of *thread, most recent first
	capacity int
}

type agentInfo struct {
	Agent
	rooms   map[id.RoomID]bool
	matcher *matcher
}

type threadKey struct {
	room id.RoomID
	root id.EventID
}

// thread is the routing memory of one thread.
type thread struct {
	key threadKey
	// addressees get a bare human reply: the last agent that posted, else the agents the
	// root (or the latest human mention) addressed.
	addressees []string
	// sessions are the agents woken in this thread, whose sessions a /clear ends.
	sessions []string
	task     bool
	assignee string
}

// New builds a router for agents; their order is the order of wakes.
func New(agents []Agent) *Router {
	r := &Router{
		byUser:   map[id.UserID]*agentInfo{},
		byName:   map[string]*agentInfo{},
		threads:  map[threadKey]*list.Element{},
		others:   map[id.RoomID]map[id.UserID]zevent.AgentContent{},
		lru:      list.New(),
		capacity: DefaultThreadMemory,
	}
	for _, a := range agents {
		ai := &agentInfo{Agent: a, rooms: map[id.RoomID]bool{}, matcher: newMatcher(a.UserID, a.DisplayName, a.Name, a.Workstation)}
		for _, room := range a.Rooms {
			ai.rooms[room] = true
		}
		r.agents = append(r.agents, ai)
		r.byUser[a.UserID] = ai
		r.byName[a.Name] = ai
	}
	return r
}

// SetThreadMemory changes how many threads are remembered (least recently used go first).
func (r *Router) SetThreadMemory(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.capacity = max(n, 1)
	r.evict()
}

// IsAgent reports whether u is one of the agents' users, and which.
func (r *Router) IsAgent(u id.UserID) (name string, ok bool) {
	if a := r.byUser[u]; a != nil {
		return a.Name, true
	}
	return "", false
}

// LearnAgents records the Zooid agents of other daemons in room (from the
// room's dev.zooid.agent state, read at start); this daemon's own are left
// out. Later changes arrive as events, through Decide.
func (r *Router) LearnAgents(room id.RoomID, agents map[id.UserID]zevent.AgentContent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for u, a := range agents {
		r.noteOtherLocked(room, u, a)
	}
}

// OtherAgent reports whether u is a Zooid agent of another daemon in room,
// and what its dev.zooid.agent says.
func (r *Router) OtherAgent(room id.RoomID, u id.UserID) (zevent.AgentContent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.others[room][u]
	return a, ok
}

// OtherAgentAt resolves an address, name or workstation.name, to another
// daemon's agent in room: its user and canonical address (workstation.name,
// or its name when its daemon names no workstation). A bare name that two
// daemons' agents share there resolves to neither.
func (r *Router) OtherAgentAt(room id.RoomID, addr string) (id.UserID, string, bool) {
	// As config.SplitAddress reads it (the router imports no config).
	ws, name, dotted := strings.Cut(addr, ".")
	if !dotted {
		ws, name = "", addr
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var found id.UserID
	var canonical string
	for u, a := range r.others[room] {
		if a.Name != name || ws != "" && a.Workstation != ws {
			continue
		}
		if found != "" {
			return "", "", false
		}
		found, canonical = u, a.Name
		if a.Workstation != "" {
			canonical = a.Workstation + "." + a.Name
		}
	}
	return found, canonical, found != ""
}

func (r *Router) noteOtherLocked(room id.RoomID, u id.UserID, a zevent.AgentContent) {
	if r.byUser[u] != nil {
		return
	}
	if a.Name == "" {
		delete(r.others[room], u)
		return
	}
	if r.others[room] == nil {
		r.others[room] = map[id.UserID]zevent.AgentContent{}
	}
	r.others[room][u] = a
}

// isOtherLocked says m's sender is another daemon's agent in m's room.
func (r *Router) isOtherLocked(m Message) bool {
	_, ok := r.others[m.Room][m.Sender]
	return ok
}

// route returns the agents m wakes, in configuration order, and updates thread memory.
func (r *Router) route(m Message) []Wake {
	if m.IsReset || m.IsTaskResult {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()

	if sender := r.byUser[m.Sender]; sender != nil {
		return r.routeAgentPost(m, sender)
	}
	if r.isOtherLocked(m) {
		if m.ThreadRoot == "" && m.IsTaskRoot {
			// A task another daemon's agent delegated to one of ours, adopted
			// (Facts.TaskRoot): only the assignee wakes, as for our own.
			return r.wakeTaskRoot(m)
		}
		r.otherAgentPost(m)
		return nil
	}
	if m.MsgType == string(event.MsgNotice) {
		// Automated clients don't answer notices (the Matrix convention), so
		// two bots can't talk each other into a loop.
		return nil
	}
	// Only an agent's post can open a task thread; a person's message that
	// carries the field is an ordinary message.
	m.IsTaskRoot, m.TaskAssignee = false, ""
	if m.ThreadRoot == "" {
		return r.routeTopLevel(m)
	}
	return r.routeThreadReply(m)
}

// observe updates thread memory from m without waking anyone: a thread's past
// read back (recall), or a task root known from the journal.
func (r *Router) observe(m Message) {
	if m.IsReset || m.IsTaskResult {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if sender := r.byUser[m.Sender]; sender != nil {
		if m.ThreadRoot != "" {
			th := r.thread(m.Room, m.ThreadRoot, true)
			th.addressees = []string{sender.Name}
			// As when routed live: a handoff makes the callee the addressee.
			if callee := r.byName[m.HandoffTo]; callee != nil && callee.rooms[m.Room] {
				th.addressees = []string{callee.Name}
			}
		} else if m.IsTaskRoot {
			r.noteTaskRoot(m)
		}
		return
	}
	if r.isOtherLocked(m) {
		r.otherAgentPost(m)
		return
	}
	if m.MsgType == string(event.MsgNotice) {
		return
	}
	if m.ThreadRoot == "" {
		if names := r.mentioned(m); len(names) > 0 {
			th := r.thread(m.Room, m.EventID, true)
			th.addressees = names
		}
		return
	}
	if names := r.mentioned(m); len(names) > 0 {
		th := r.thread(m.Room, m.ThreadRoot, true)
		th.addressees = names
	}
}

// needsThreadMemory reports whether route's answer for m depends on memory of
// m's thread that the router does not hold: a person's bare reply (no notice,
// no mention) in a thread it has neither seen nor recalled. Only then is the
// implicit addressee needed, so only then is the thread read back (recall)
// before routing m.
func (r *Router) needsThreadMemory(m Message) bool {
	if m.IsReset || m.IsTaskResult || m.ThreadRoot == "" || m.MsgType == string(event.MsgNotice) {
		return false
	}
	if r.byUser[m.Sender] != nil {
		return false
	}
	r.mu.Lock()
	_, known := r.threads[threadKey{m.Room, m.ThreadRoot}]
	other := r.isOtherLocked(m)
	r.mu.Unlock()
	if other {
		return false
	}
	// The thread lookup first: in a known thread (most replies) the mention
	// scan is left to route alone.
	return !known && len(r.mentioned(m)) == 0
}

// recall rebuilds the memory of thread (room, root) from what the homeserver
// holds of it, oldest first (the root, then its newest replies), waking nobody.
// Afterwards the thread is known even when nothing in it addressed an agent,
// so its next replies are routed without reading it again.
func (r *Router) recall(room id.RoomID, root id.EventID, msgs []Message) {
	for _, m := range msgs {
		r.observe(m)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.thread(room, root, true)
}

// Thread returns what the router remembers of the thread (room, root).
func (r *Router) Thread(room id.RoomID, root id.EventID) (ThreadInfo, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	th := r.thread(room, root, false)
	if th == nil {
		return ThreadInfo{}, false
	}
	return th.info(), true
}

// reset handles /clear in a thread: it returns the agents the router woke there, whose
// sessions for the thread end. The thread's routing memory survives, so a later bare reply
// still finds its addressee.
func (r *Router) reset(room id.RoomID, root id.EventID) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	th := r.thread(room, root, false)
	if th == nil {
		return nil
	}
	out := slices.Clone(th.sessions)
	th.sessions = nil
	return out
}

func (r *Router) routeAgentPost(m Message, sender *agentInfo) []Wake {
	if m.ThreadRoot == "" && m.IsTaskRoot {
		// A delegation: only the assignee wakes, even when it is the delegating agent
		// itself, because the task runs in a session of its own.
		return r.wakeTaskRoot(m)
	}
	// Agent prose wakes nobody (in-thread handoffs are the daemon's, at the
	// moment the prose is posted); it only makes its author the addressee,
	// or, for a handoff's notice, the callee, who works on it now.
	if m.ThreadRoot != "" {
		th := r.thread(m.Room, m.ThreadRoot, true)
		th.addressees = []string{sender.Name}
		th.addSession(sender.Name)
		if callee := r.byName[m.HandoffTo]; callee != nil && callee.rooms[m.Room] {
			th.addressees = []string{callee.Name}
			th.addSession(callee.Name)
		}
	}
	return nil
}

// otherAgentPost is a post of another daemon's agent: prose, which wakes
// nobody here (that daemon answers for its agents). In a thread it makes that
// agent the last to post, so a person's bare reply there goes to it, and to
// none of this daemon's agents.
func (r *Router) otherAgentPost(m Message) {
	if m.ThreadRoot != "" {
		r.thread(m.Room, m.ThreadRoot, true).addressees = nil
	}
}

func (r *Router) noteTaskRoot(m Message) *thread {
	th := r.thread(m.Room, m.EventID, true)
	th.task = true
	th.assignee = m.TaskAssignee
	th.addressees = nil
	if a := r.byName[m.TaskAssignee]; a != nil && a.rooms[m.Room] {
		th.addressees = []string{a.Name}
	}
	return th
}

func (r *Router) wakeTaskRoot(m Message) []Wake {
	th := r.noteTaskRoot(m)
	if len(th.addressees) == 0 {
		return nil
	}
	a := r.byName[th.addressees[0]]
	th.addSession(a.Name)
	return []Wake{r.wake(a, m, m.EventID, WhyTaskAssignee)}
}

func (r *Router) routeTopLevel(m Message) []Wake {
	var wakes []Wake
	mentioned := r.mentioned(m)
	for _, a := range r.agents {
		if !a.rooms[m.Room] {
			continue
		}
		switch {
		case slices.Contains(mentioned, a.Name):
			wakes = append(wakes, r.wake(a, m, m.EventID, WhyMention))
		case a.Trigger == Any:
			wakes = append(wakes, r.wake(a, m, m.EventID, WhyTriggerAny))
		}
	}
	if len(wakes) == 0 {
		return nil
	}
	th := r.thread(m.Room, m.EventID, true)
	th.addressees = nil
	for _, w := range wakes {
		th.addressees = append(th.addressees, w.Agent)
		th.addSession(w.Agent)
	}
	return wakes
}

func (r *Router) routeThreadReply(m Message) []Wake {
	th := r.thread(m.Room, m.ThreadRoot, false)
	mentioned := r.mentioned(m)
	var targets []string
	why := WhyAddressee
	switch {
	case len(mentioned) > 0:
		// A human mention switches who the thread is talking to.
		targets, why = mentioned, WhyMention
	case th != nil && th.task:
		if th.assignee != "" && r.byName[th.assignee] != nil && r.byName[th.assignee].rooms[m.Room] {
			targets, why = []string{th.assignee}, WhyTaskAssignee
		}
	case th != nil:
		targets = th.addressees
	}
	chosen := len(targets)
	if th == nil || !th.task {
		for _, a := range r.agents {
			if a.Trigger == Any && a.rooms[m.Room] && !slices.Contains(targets, a.Name) {
				targets = append(targets, a.Name)
			}
		}
	}
	if len(targets) == 0 {
		return nil
	}
	if th == nil {
		th = r.thread(m.Room, m.ThreadRoot, true)
	}
	if len(mentioned) > 0 {
		th.addressees = slices.Clone(mentioned)
	}
	var wakes []Wake
	for _, a := range r.agents {
		if !slices.Contains(targets, a.Name) || !a.rooms[m.Room] {
			continue
		}
		th.addSession(a.Name)
		w := why
		if !slices.Contains(targets[:chosen], a.Name) {
			w = WhyTriggerAny
		}
		wakes = append(wakes, r.wake(a, m, m.ThreadRoot, w))
	}
	return wakes
}

// AtMentioned lists the agents bound to room that body @-mentions deliberately
// (pill, link, user id, "@localpart" or "@Display Name"), in configuration order.
// The daemon uses it on agents' own prose, which carries no m.mentions, to find
// in-thread handoffs; a bare display name there is just a word.
func (r *Router) AtMentioned(room id.RoomID, body string) []string {
	var out []string
	for _, a := range r.agents {
		if a.rooms[room] && a.matcher.atMentionedIn(body) {
			out = append(out, a.Name)
		}
	}
	return out
}

// mentioned lists the agents bound to m's room that m mentions, in configuration order.
func (r *Router) mentioned(m Message) []string {
	var out []string
	for _, a := range r.agents {
		if !a.rooms[m.Room] {
			continue
		}
		if m.Mentions != nil {
			if slices.Contains(m.Mentions.UserIDs, a.UserID) {
				out = append(out, a.Name)
			}
			continue
		}
		if a.matcher.mentionedIn(m.Body) {
			out = append(out, a.Name)
		}
	}
	return out
}

func (r *Router) wake(a *agentInfo, m Message, root id.EventID, why string) Wake {
	return Wake{
		Agent:      a.Name,
		Room:       m.Room,
		ThreadRoot: root,
		Text:       a.matcher.strip(m.Body),
		EventID:    m.EventID,
		Sender:     m.Sender,
		Why:        why,
	}
}

// thread returns the memory of (room, root), creating it when create is set, and marks it
// most recently used.
func (r *Router) thread(room id.RoomID, root id.EventID, create bool) *thread {
	k := threadKey{room, root}
	if el, ok := r.threads[k]; ok {
		r.lru.MoveToFront(el)
		return el.Value.(*thread)
	}
	if !create {
		return nil
	}
	th := &thread{key: k}
	r.threads[k] = r.lru.PushFront(th)
	r.evict()
	return th
}

func (r *Router) evict() {
	for r.lru.Len() > r.capacity {
		el := r.lru.Back()
		r.lru.Remove(el)
		delete(r.threads, el.Value.(*thread).key)
	}
}

func (th *thread) addSession(name string) {
	if !slices.Contains(th.sessions, name) {
		th.sessions = append(th.sessions, name)
	}
}

func (th *thread) info() ThreadInfo {
	return ThreadInfo{Room: th.key.room, Root: th.key.root, Task: th.task, Assignee: th.assignee, Addressees: slices.Clone(th.addressees)}
}
