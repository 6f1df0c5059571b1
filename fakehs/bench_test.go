package fakehs

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"
)

// benchRoom imports a room of n messages where every 10th event is a thread
// root and the next nine reply to the latest root.
func benchRoom(b *testing.B, s *Server, n int) (*ImportedRoom, string) {
	b.Helper()
	uid, tok, err := s.RegisterUser("reader", "Reader")
	if err != nil {
		b.Fatal(err)
	}
	events := make([]SeedEvent, n)
	root := -1
	for i := range events {
		se := SeedEvent{Sender: uid, Content: map[string]any{"msgtype": "m.text", "body": "message " + strconv.Itoa(i)}, ThreadRoot: -1}
		if i%10 == 0 {
			root = i
		} else {
			se.ThreadRoot = root
		}
		events[i] = se
	}
	imp, err := s.ImportRoom(RoomSeed{Creator: uid, Name: "bench", Events: events})
	if err != nil {
		b.Fatal(err)
	}
	return imp, tok
}

// benchGetLoop times GET url with tok, one request per benchmark iteration, on one client.
func benchGetLoop(b *testing.B, url, tok string) {
	client := &http.Client{}
	b.ResetTimer()
	for b.Loop() {
		benchGet(b, client, url, tok)
	}
}

func benchGet(b *testing.B, client *http.Client, url, tok string) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	status, err := doAndDrain(client, req)
	if err != nil {
		b.Fatal(err)
	}
	if status != 200 {
		b.Fatalf("status %d", status)
	}
}

// doAndDrain sends req and reads the whole body, so the connection goes back to the client's
// pool as a real client's would; it is safe in the goroutines of parallel benchmarks.
func doAndDrain(client *http.Client, req *http.Request) (int, error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// BenchmarkMessagesPage50 reads a page of 50 from the middle of rooms of
// growing size; the cost per page should stay flat.
func BenchmarkMessagesPage50(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("room=%d", n), func(b *testing.B) {
			s := New(b)
			imp, tok := benchRoom(b, s, n)
			s.mu.RLock()
			mid := s.state.events[imp.EventIDs[n/2]].Stream
			s.mu.RUnlock()
			url := s.URL() + "/_matrix/client/v3/rooms/" + string(imp.RoomID) + "/messages?dir=b&limit=50&from=" + s.roomToken(imp.RoomID, mid)
			benchGetLoop(b, url, tok)
		})
	}
}

// BenchmarkThreads100k lists the 50 most recently active threads of a 100k-event room.
func BenchmarkThreads100k(b *testing.B) {
	s := New(b)
	imp, tok := benchRoom(b, s, 100_000)
	url := s.URL() + "/_matrix/client/v1/rooms/" + string(imp.RoomID) + "/threads?limit=50"
	benchGetLoop(b, url, tok)
}

// BenchmarkSend measures PUT /send throughput from parallel clients.
func BenchmarkSend(b *testing.B) {
	s := New(b)
	imp, tok := benchRoom(b, s, 10)
	var seq atomic.Int64
	base := s.URL() + "/_matrix/client/v3/rooms/" + string(imp.RoomID) + "/send/m.room.message/"
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		client := &http.Client{}
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPut, base+"b"+strconv.FormatInt(seq.Add(1), 10),
				stringsReader(`{"msgtype":"m.text","body":"bench"}`))
			req.Header.Set("Authorization", "Bearer "+tok)
			if _, err := doAndDrain(client, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
}

// BenchmarkSyncWake50 measures one send reaching 50 long-polling /sync clients.
func BenchmarkSyncWake50(b *testing.B) {
	const clients = 50
	s := New(b)
	creator, ctok, err := s.RegisterUser("creator", "")
	if err != nil {
		b.Fatal(err)
	}
	var members []id.UserID
	toks := make([]string, clients)
	for i := range toks {
		uid, tok, err := s.RegisterUser("waiter"+strconv.Itoa(i), "")
		if err != nil {
			b.Fatal(err)
		}
		members, toks[i] = append(members, uid), tok
	}
	imp, err := s.ImportRoom(RoomSeed{Creator: creator, Members: members})
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients + 1}}
	sendURL := s.URL() + "/_matrix/client/v3/rooms/" + string(imp.RoomID) + "/send/m.room.message/"
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		since := s.syncToken(currentStream(s))
		var ready, done sync.WaitGroup
		ready.Add(clients)
		done.Add(clients)
		for _, tok := range toks {
			go func() {
				defer done.Done()
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet,
					s.URL()+"/_matrix/client/v3/sync?timeout=30000&since="+since, nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				ready.Done()
				if _, err := doAndDrain(client, req); err != nil {
					b.Error(err)
					return
				}
			}()
		}
		ready.Wait()
		time.Sleep(20 * time.Millisecond) // let the polls reach their wait
		b.StartTimer()
		req, _ := http.NewRequest(http.MethodPut, sendURL+"w"+strconv.Itoa(i), stringsReader(`{"msgtype":"m.text","body":"wake"}`))
		req.Header.Set("Authorization", "Bearer "+ctok)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		done.Wait()
	}
}

func currentStream(s *Server) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.state.stream
}
