package tmpdiff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"maunium.net/go/mautrix/appservice"

	"github.com/zooid-dev/zooid/docker/synapse"
	"github.com/zooid-dev/zooid/fakehs"
)

type obs struct {
	name, val string
}

type hs struct {
	t       *testing.T
	base    string
	server  string
	asToken string
	obs     []obs
	pushes  *pushes
	cli     *http.Client
}

type pushes struct {
	mu   sync.Mutex
	txns []string
}

func (p *pushes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.txns = append(p.txns, r.Method+" "+r.URL.Path+" "+string(b))
	p.mu.Unlock()
	if r.Method == http.MethodPut {
		w.Write([]byte("{}"))
		return
	}
	w.WriteHeader(404)
	w.Write([]byte(`{"errcode":"M_NOT_FOUND"}`))
}

func keys(r gjson.Result) string {
	if !r.IsObject() {
		if r.IsArray() {
			return fmt.Sprintf("array[%d]", len(r.Array()))
		}
		return r.Raw
	}
	var ks []string
	r.ForEach(func(k, _ gjson.Result) bool { ks = append(ks, k.String()); return true })
	sort.Strings(ks)
	return "{" + strings.Join(ks, ",") + "}"
}

// do returns status and body.
func (h *hs) do(method, path, token string, body any) (int, gjson.Result) {
	var rd io.Reader
	if s, ok := body.(string); ok {
		rd = strings.NewReader(s)
	} else if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.base+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.cli.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, gjson.ParseBytes(b)
}

func (h *hs) rec(name string, status int, r gjson.Result, extra ...string) gjson.Result {
	v := fmt.Sprintf("%d %s %s", status, r.Get("errcode").String(), keys(r))
	if e := r.Get("error").String(); e != "" {
		v += " error=" + strconv.Quote(e)
	}
	if len(extra) > 0 {
		v += " | " + strings.Join(extra, " ")
	}
	h.obs = append(h.obs, obs{name, v})
	return r
}

func (h *hs) call(name, method, path, token string, body any, extraPaths ...string) gjson.Result {
	st, r := h.do(method, path, token, body)
	var extra []string
	for _, p := range extraPaths {
		if strings.Contains(p, "#") {
			extra = append(extra, p+"="+r.Get(p).Raw)
			continue
		}
		extra = append(extra, p+"="+keysOrVal(r.Get(p)))
	}
	return h.rec(name, st, r, extra...)
}

func keysOrVal(r gjson.Result) string {
	if r.IsObject() || r.IsArray() {
		return keys(r)
	}
	if !r.Exists() {
		return "<absent>"
	}
	return r.String()
}

func esc(s string) string { return url.PathEscape(s) }

func (h *hs) register(name string) (string, string) {
	st, r := h.do("POST", "/_matrix/client/v3/register", "", map[string]any{"username": name, "password": "pw"})
	if st != 401 {
		h.t.Fatalf("register %s: %d %s", name, st, r.Raw)
	}
	st, r = h.do("POST", "/_matrix/client/v3/register", "", map[string]any{"username": name, "password": "pw", "auth": map[string]any{"type": "m.login.dummy", "session": r.Get("session").String()}})
	if st != 200 {
		h.t.Fatalf("register %s: %d %s", name, st, r.Raw)
	}
	return r.Get("user_id").String(), r.Get("access_token").String()
}

var txn int

func (h *hs) send(room, token, asUser string, content any) (int, gjson.Result) {
	txn++
	q := ""
	if asUser != "" {
		q = "?user_id=" + url.QueryEscape(asUser)
	}
	return h.do("PUT", fmt.Sprintf("/_matrix/client/v3/rooms/%s/send/m.room.message/t%d%s", esc(room), txn, q), token, content)
}

func scenario(h *hs) {
	C := "/_matrix/client/v3"
	V1 := "/_matrix/client/v1"
	h.call("versions", "GET", "/_matrix/client/versions", "", nil)
	h.call("login flows", "GET", C+"/login", "", nil, "flows.#.type")
	alice, at := h.register("alice")
	bob, bt := h.register("bob")
	_ = bob
	h.call("capabilities", "GET", C+"/capabilities", at, nil, "capabilities")
	h.call("login password", "POST", C+"/login", "", map[string]any{"type": "m.login.password", "identifier": map[string]any{"type": "m.id.user", "user": "alice"}, "password": "pw"})
	h.call("login wrong pw", "POST", C+"/login", "", map[string]any{"type": "m.login.password", "identifier": map[string]any{"type": "m.id.user", "user": "alice"}, "password": "nope"})
	h.call("register/available taken", "GET", C+"/register/available?username=alice", "", nil)
	h.call("register/available exclusive", "GET", C+"/register/available?username=zooid_free", "", nil)
	h.call("register/available free", "GET", C+"/register/available?username=carol", "", nil)
	h.call("register dummy in AS namespace", "POST", C+"/register", "", map[string]any{"username": "zooid_human", "password": "pw", "auth": map[string]any{"type": "m.login.dummy"}})
	h.call("register AS user", "POST", C+"/register", h.asToken, map[string]any{"type": "m.login.application_service", "username": "zooid_agent", "inhibit_login": true})
	agent := "@zooid_agent:" + h.server
	q := "?user_id=" + url.QueryEscape(agent)
	h.call("register AS user again", "POST", C+"/register", h.asToken, map[string]any{"type": "m.login.application_service", "username": "zooid_agent"})
	h.call("register AS user outside ns", "POST", C+"/register", h.asToken, map[string]any{"type": "m.login.application_service", "username": "outsider"})
	h.call("register AS no type", "POST", C+"/register", h.asToken, map[string]any{"username": "zooid_notype"})
	h.call("AS whoami sender", "GET", C+"/account/whoami", h.asToken, nil, "user_id")
	h.call("AS whoami agent", "GET", C+"/account/whoami"+q, h.asToken, nil, "user_id")
	h.call("AS whoami unregistered in ns", "GET", C+"/account/whoami?user_id="+url.QueryEscape("@zooid_ghost:"+h.server), h.asToken, nil)
	h.call("AS whoami outside ns", "GET", C+"/account/whoami?user_id="+url.QueryEscape(alice), h.asToken, nil)
	h.call("set displayname AS", "PUT", C+"/profile/"+esc(agent)+"/displayname"+q, h.asToken, map[string]any{"displayname": "Agent"})
	h.call("get profile", "GET", C+"/profile/"+esc(agent), at, nil, "displayname")
	h.call("get profile unknown", "GET", C+"/profile/"+esc("@nobody:"+h.server), at, nil)
	h.call("get displayname unset", "GET", C+"/profile/"+esc(alice)+"/displayname", at, nil)

	r := h.call("createRoom public alias", "POST", C+"/createRoom", at, map[string]any{"preset": "public_chat", "room_alias_name": "general", "name": "General"})
	room := r.Get("room_id").String()
	h.call("createRoom dup alias", "POST", C+"/createRoom", at, map[string]any{"room_alias_name": "general"})
	h.call("createRoom bad preset", "POST", C+"/createRoom", at, map[string]any{"preset": "nope"})
	h.call("resolve alias", "GET", C+"/directory/room/"+esc("#general:"+h.server), at, nil, "servers")
	h.call("resolve unknown alias", "GET", C+"/directory/room/"+esc("#nope:"+h.server), at, nil)
	h.call("AS join by alias", "POST", C+"/join/"+esc("#general:"+h.server)+q, h.asToken, map[string]any{})
	h.call("join unknown room id", "POST", C+"/join/"+esc("!nope:"+h.server), bt, map[string]any{})
	h.call("join unknown alias", "POST", C+"/join/"+esc("#nope:"+h.server), bt, map[string]any{})
	h.call("rooms/{id}/join private? public", "POST", C+"/rooms/"+esc(room)+"/join", bt, map[string]any{})
	h.call("joined_rooms", "GET", C+"/joined_rooms", bt, nil, "joined_rooms")

	st, s1 := h.send(room, at, "", map[string]any{"msgtype": "m.text", "body": "hello"})
	h.rec("send", st, s1)
	e1 := s1.Get("event_id").String()
	txn--
	st, s1b := h.send(room, at, "", map[string]any{"msgtype": "m.text", "body": "hello"})
	h.rec("send same txn", st, s1b, fmt.Sprintf("same=%v", s1b.Get("event_id").String() == e1))
	st, s2 := h.send(room, h.asToken, agent, map[string]any{"msgtype": "m.notice", "body": "from agent"})
	h.rec("send as AS user", st, s2)
	st, bad := h.do("PUT", C+"/rooms/"+esc(room)+"/send/m.room.message/badjson", at, "{not json")
	h.rec("send bad json", st, bad)
	st, arr := h.do("PUT", C+"/rooms/"+esc(room)+"/send/m.room.message/arrjson", at, "[1,2]")
	h.rec("send json array", st, arr)

	h.call("get event", "GET", C+"/rooms/"+esc(room)+"/event/"+esc(e1), at, nil, "unsigned")
	h.call("get event unknown", "GET", C+"/rooms/"+esc(room)+"/event/"+esc("$nope"), at, nil)
	h.call("get event wrong room", "GET", C+"/rooms/"+esc("!nope:"+h.server)+"/event/"+esc(e1), at, nil)
	h.call("state name", "GET", C+"/rooms/"+esc(room)+"/state/m.room.name", at, nil)
	h.call("state name with slash", "GET", C+"/rooms/"+esc(room)+"/state/m.room.name/", at, nil)
	h.call("state topic missing", "GET", C+"/rooms/"+esc(room)+"/state/m.room.topic", at, nil)
	h.call("state all", "GET", C+"/rooms/"+esc(room)+"/state", at, nil)
	h.call("state member", "GET", C+"/rooms/"+esc(room)+"/state/m.room.member/"+esc(agent), at, nil, "membership", "displayname")
	h.call("AS put topic (PL 0)", "PUT", C+"/rooms/"+esc(room)+"/state/m.room.topic"+q, h.asToken, map[string]any{"topic": "x"})
	h.call("joined_members", "GET", C+"/rooms/"+esc(room)+"/joined_members", at, nil, "joined")
	h.call("members", "GET", C+"/rooms/"+esc(room)+"/members", at, nil, "chunk")
	h.call("members not_membership=leave", "GET", C+"/rooms/"+esc(room)+"/members?not_membership=leave", at, nil, "chunk")

	h.call("messages b no from", "GET", C+"/rooms/"+esc(room)+"/messages?dir=b&limit=3", at, nil, "chunk", "chunk.0.type", "chunk.0.unsigned")
	m := h.call("messages f no from", "GET", C+"/rooms/"+esc(room)+"/messages?dir=f&limit=3", at, nil, "chunk", "chunk.0.type")
	h.call("messages f to end", "GET", C+"/rooms/"+esc(room)+"/messages?dir=f&limit=100&from="+url.QueryEscape(m.Get("end").String()), at, nil, "chunk", "end")
	h.call("messages no dir", "GET", C+"/rooms/"+esc(room)+"/messages", at, nil)
	h.call("messages bad dir", "GET", C+"/rooms/"+esc(room)+"/messages?dir=x", at, nil)
	h.call("messages limit 0", "GET", C+"/rooms/"+esc(room)+"/messages?dir=b&limit=0", at, nil, "chunk")
	h.call("messages limit -1", "GET", C+"/rooms/"+esc(room)+"/messages?dir=b&limit=-1", at, nil)
	h.call("messages limit abc", "GET", C+"/rooms/"+esc(room)+"/messages?dir=b&limit=abc", at, nil)
	h.call("messages filter", "GET", C+"/rooms/"+esc(room)+"/messages?dir=b&filter="+url.QueryEscape(`{"types":["m.room.message"],"lazy_load_members":true}`), at, nil, "chunk", "state")
	h.call("messages bad filter", "GET", C+"/rooms/"+esc(room)+"/messages?dir=b&filter=notjson", at, nil)
	h.call("messages unknown room", "GET", C+"/rooms/"+esc("!nope:"+h.server)+"/messages?dir=b", at, nil)
	h.call("context", "GET", C+"/rooms/"+esc(room)+"/context/"+esc(e1)+"?limit=2", at, nil, "events_before", "events_after", "state")
	h.call("context unknown", "GET", C+"/rooms/"+esc(room)+"/context/"+esc("$nope"), at, nil)

	// threads
	st, root := h.send(room, at, "", map[string]any{"msgtype": "m.text", "body": "root"})
	h.rec("send root", st, root)
	rootID := root.Get("event_id").String()
	st, rep := h.send(room, h.asToken, agent, map[string]any{"msgtype": "m.text", "body": "reply", "m.relates_to": map[string]any{"rel_type": "m.thread", "event_id": rootID, "is_falling_back": true, "m.in_reply_to": map[string]any{"event_id": rootID}}})
	h.rec("send thread reply", st, rep)
	repID := rep.Get("event_id").String()
	st, rep2 := h.send(room, h.asToken, agent, map[string]any{"msgtype": "m.text", "body": "reply to reply", "m.relates_to": map[string]any{"rel_type": "m.thread", "event_id": repID}})
	h.rec("thread reply to a reply (not root)", st, rep2)
	st, e3 := h.send(room, at, "", map[string]any{"msgtype": "m.text", "body": "reply to nonexistent", "m.relates_to": map[string]any{"rel_type": "m.thread", "event_id": "$doesnotexist"}})
	h.rec("thread reply to unknown root", st, e3)
	st, ed := h.send(room, at, "", map[string]any{"msgtype": "m.text", "body": "* edited", "m.new_content": map[string]any{"msgtype": "m.text", "body": "edited"}, "m.relates_to": map[string]any{"rel_type": "m.replace", "event_id": e1}})
	h.rec("edit", st, ed)
	time.Sleep(500 * time.Millisecond)
	h.call("get root (bundled)", "GET", C+"/rooms/"+esc(room)+"/event/"+esc(rootID), at, nil, `unsigned.m\.relations`, `unsigned.m\.relations.m\.thread`, `unsigned.m\.relations.m\.thread.count`, `unsigned.m\.relations.m\.thread.current_user_participated`, `unsigned.m\.relations.m\.thread.latest_event.content.body`, `unsigned.m\.relations.m\.thread.latest_event.unsigned`)
	h.call("get edited (bundled)", "GET", C+"/rooms/"+esc(room)+"/event/"+esc(e1), at, nil, `unsigned.m\.relations`, `unsigned.m\.relations.m\.replace`, "content.body")
	h.call("relations thread", "GET", V1+"/rooms/"+esc(room)+"/relations/"+esc(rootID)+"/m.thread", at, nil, "chunk", "next_batch", "prev_batch")
	h.call("relations all", "GET", V1+"/rooms/"+esc(room)+"/relations/"+esc(rootID), at, nil, "chunk")
	h.call("relations thread+type", "GET", V1+"/rooms/"+esc(room)+"/relations/"+esc(rootID)+"/m.thread/m.room.message", at, nil, "chunk")
	h.call("relations recurse", "GET", V1+"/rooms/"+esc(room)+"/relations/"+esc(rootID)+"?recurse=true", at, nil, "chunk", "recursion_depth")
	h.call("relations unknown event", "GET", V1+"/rooms/"+esc(room)+"/relations/"+esc("$nope"), at, nil, "chunk")
	h.call("threads", "GET", V1+"/rooms/"+esc(room)+"/threads", at, nil, "chunk", "next_batch", "chunk.#.content.body", "chunk.0.unsigned")
	mb := h.call("messages b all", "GET", C+"/rooms/"+esc(room)+"/messages?dir=b&limit=100", at, nil, "chunk", "end")
	h.call("messages b from end", "GET", C+"/rooms/"+esc(room)+"/messages?dir=b&limit=100&from="+url.QueryEscape(mb.Get("end").String()), at, nil, "chunk", "end")
	h.call("messages b limit=13 (all but create)", "GET", C+"/rooms/"+esc(room)+"/messages?dir=b&limit=13", at, nil, "chunk", "end")
	mf := h.call("messages f all", "GET", C+"/rooms/"+esc(room)+"/messages?dir=f&limit=100", at, nil, "chunk", "end")
	h.call("messages f beyond end", "GET", C+"/rooms/"+esc(room)+"/messages?dir=f&limit=100&from="+url.QueryEscape(mf.Get("end").String()), at, nil, "chunk", "end")
	h.call("relations thread limit1", "GET", V1+"/rooms/"+esc(room)+"/relations/"+esc(rootID)+"/m.thread?limit=1", at, nil, "chunk", "next_batch")
	h.call("threads participated (bob)", "GET", V1+"/rooms/"+esc(room)+"/threads?include=participated", bt, nil, "chunk")
	h.call("threads participated (agent)", "GET", V1+"/rooms/"+esc(room)+"/threads?include=participated&user_id="+url.QueryEscape(agent), h.asToken, nil, "chunk")
	h.call("threads bad include", "GET", V1+"/rooms/"+esc(room)+"/threads?include=x", at, nil)
	h.call("messages b (thread view)", "GET", C+"/rooms/"+esc(room)+"/messages?dir=b&limit=1", at, nil, "chunk.0.content.body", "chunk.0.unsigned")

	// non-member
	_, ct := h.register("carol")
	h.call("non-member messages", "GET", C+"/rooms/"+esc(room)+"/messages?dir=b", ct, nil)
	h.call("non-member event", "GET", C+"/rooms/"+esc(room)+"/event/"+esc(e1), ct, nil)
	h.call("non-member state", "GET", C+"/rooms/"+esc(room)+"/state", ct, nil)
	h.call("non-member joined_members", "GET", C+"/rooms/"+esc(room)+"/joined_members", ct, nil)
	h.call("non-member relations", "GET", V1+"/rooms/"+esc(room)+"/relations/"+esc(rootID), ct, nil)
	h.call("non-member threads", "GET", V1+"/rooms/"+esc(room)+"/threads", ct, nil)
	h.call("non-member context", "GET", C+"/rooms/"+esc(room)+"/context/"+esc(e1), ct, nil)
	st, nm := h.send(room, ct, "", map[string]any{"msgtype": "m.text", "body": "intruder"})
	h.rec("non-member send", st, nm)

	// private room invite flow
	pr := h.call("createRoom private invite", "POST", C+"/createRoom", at, map[string]any{"invite": []string{agent}}).Get("room_id").String()
	h.call("invite already invited", "POST", C+"/rooms/"+esc(pr)+"/invite", at, map[string]any{"user_id": agent})
	h.call("invite unknown user", "POST", C+"/rooms/"+esc(pr)+"/invite", at, map[string]any{"user_id": "@ghost:" + h.server})
	h.call("join private uninvited", "POST", C+"/rooms/"+esc(pr)+"/join", ct, map[string]any{})
	h.call("AS joins private invited", "POST", C+"/rooms/"+esc(pr)+"/join"+q, h.asToken, map[string]any{})
	h.call("AS sync", "GET", C+"/sync?timeout=0"+"&user_id="+url.QueryEscape(agent), h.asToken, nil, "rooms", "rooms.join", "account_data", "presence")
	h.call("leave", "POST", C+"/rooms/"+esc(pr)+"/leave"+q, h.asToken, map[string]any{})
	h.call("leave again", "POST", C+"/rooms/"+esc(pr)+"/leave"+q, h.asToken, map[string]any{})
	h.call("messages after leave", "GET", C+"/rooms/"+esc(pr)+"/messages?dir=b"+"&user_id="+url.QueryEscape(agent), h.asToken, nil, "chunk")
	h.call("kick bob not in room", "POST", C+"/rooms/"+esc(pr)+"/kick", at, map[string]any{"user_id": bob})

	// redaction
	st, rd := h.do("PUT", C+"/rooms/"+esc(room)+"/redact/"+esc(e1)+"/r1", at, map[string]any{"reason": "x"})
	h.rec("redact", st, rd)
	time.Sleep(300 * time.Millisecond)
	h.call("get redacted", "GET", C+"/rooms/"+esc(room)+"/event/"+esc(e1), at, nil, "content", "unsigned", "unsigned.redacted_because.type")
	h.call("typing", "PUT", C+"/rooms/"+esc(room)+"/typing/"+esc(alice), at, map[string]any{"typing": true, "timeout": 1000})
	h.call("typing other user", "PUT", C+"/rooms/"+esc(room)+"/typing/"+esc(bob), at, map[string]any{"typing": true, "timeout": 1000})
	h.call("receipt", "POST", C+"/rooms/"+esc(room)+"/receipt/m.read/"+esc(rootID), at, map[string]any{})
	h.call("read_markers", "POST", C+"/rooms/"+esc(room)+"/read_markers", at, map[string]any{"m.fully_read": rootID})
	h.call("account_data put", "PUT", C+"/user/"+esc(alice)+"/account_data/x.zooid", at, map[string]any{"a": 1})
	h.call("account_data get", "GET", C+"/user/"+esc(alice)+"/account_data/x.zooid", at, nil)
	h.call("account_data missing", "GET", C+"/user/"+esc(alice)+"/account_data/x.none", at, nil)
	h.call("account_data other user", "GET", C+"/user/"+esc(bob)+"/account_data/x.zooid", at, nil)
	f := h.call("filter post", "POST", C+"/user/"+esc(alice)+"/filter", at, map[string]any{"room": map[string]any{"timeline": map[string]any{"limit": 5}}})
	h.call("filter get", "GET", C+"/user/"+esc(alice)+"/filter/"+esc(f.Get("filter_id").String()), at, nil)
	h.call("filter get unknown", "GET", C+"/user/"+esc(alice)+"/filter/9999", at, nil)
	h.call("sync", "GET", C+"/sync?timeout=0", at, nil, "rooms.join", "next_batch")
	h.call("sync bad since", "GET", C+"/sync?timeout=0&since=garbage", at, nil)
	h.call("sync bad filter id", "GET", C+"/sync?timeout=0&filter=9999", at, nil)
	h.call("unknown endpoint", "GET", C+"/nope", at, nil)
	h.call("wrong method", "DELETE", C+"/createRoom", at, nil)
	h.call("no token", "GET", C+"/joined_rooms", "", nil)
	h.call("bad token", "GET", C+"/joined_rooms", "garbage", nil)
	h.call("logout", "POST", C+"/logout", bt, map[string]any{})
	h.call("after logout", "GET", C+"/account/whoami", bt, nil)
	time.Sleep(2 * time.Second)
	// pushed transactions: which event types arrived, in order
	h.pushes.mu.Lock()
	var types []string
	for _, tx := range h.pushes.txns {
		parts := strings.SplitN(tx, " ", 3)
		if parts[0] != "PUT" {
			types = append(types, parts[0]+" "+regexp.MustCompile(`[^/]+$`).ReplaceAllString(parts[1], "X"))
			continue
		}
		b := gjson.Parse(parts[2])
		types = append(types, "txnkeys="+keys(b))
		for _, e := range b.Get("events").Array() {
			types = append(types, e.Get("type").String()+"/"+e.Get("content.membership").String()+" "+keys(e))
		}
	}
	h.pushes.mu.Unlock()
	h.obs = append(h.obs, obs{"pushes", "\n      " + strings.Join(types, "\n      ")})
}

func newReg(t *testing.T, server string) (*appservice.Registration, *pushes) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pushes{}
	srv := &http.Server{Handler: p}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	reg := appservice.CreateRegistration()
	reg.ID = "diff"
	reg.URL = "http://" + ln.Addr().String()
	reg.SenderLocalpart = "zooid_bot"
	reg.Namespaces.UserIDs.Register(regexp.MustCompile("@zooid_.*:"+regexp.QuoteMeta(server)), true)
	return reg, p
}

func TestDiff(t *testing.T) {
	regS, pS := newReg(t, "localhost")
	syn := synapse.RunForTest(t, synapse.WithAppservice(regS))
	regF, pF := newReg(t, "localhost")
	fk := fakehs.New(t, fakehs.WithServerName("localhost"), fakehs.WithAppservice(regF))
	hS := &hs{t: t, base: syn.BaseURL(), server: "localhost", asToken: regS.AppToken, pushes: pS, cli: &http.Client{Timeout: 30 * time.Second}}
	hF := &hs{t: t, base: fk.URL(), server: "localhost", asToken: regF.AppToken, pushes: pF, cli: &http.Client{Timeout: 30 * time.Second}}
	scenario(hS)
	scenario(hF)
	n := 0
	for i := range hS.obs {
		if i >= len(hF.obs) {
			break
		}
		if hS.obs[i].val != hF.obs[i].val {
			n++
			fmt.Printf("DIFF %s\n  synapse: %s\n  fakehs:  %s\n", hS.obs[i].name, hS.obs[i].val, hF.obs[i].val)
		}
	}
	fmt.Printf("%d observations, %d differ\n", len(hS.obs), n)
}
