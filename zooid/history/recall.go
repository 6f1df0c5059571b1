package history

import (
	"context"
	"fmt"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// TailScanBound bounds the /messages events ThreadTail walks on a server
// without /relations: as much of the room as the daemon's start-up replay
// used to read, so routing never costs that server more than it did.
const TailScanBound = 500

// ThreadTail reads what routing needs of a thread the daemon holds no memory
// of: its root and its newest n replies (message events of the thread, newest
// first). It reads /relations of the root (one request, more only for long
// threads); a server without that endpoint is scanned back from the newest
// event to the root, at most TailScanBound events. The root is nil when it is
// not a message of room (another room's, or not a message); when the server
// refuses it (gone, or never readable by this reader) there is no thread to
// read, and ThreadTail returns nothing and no error.
func ThreadTail(ctx context.Context, cli *mautrix.Client, room id.RoomID, root id.EventID, n int, dec Decrypter) (*event.Event, []*event.Event, error) {
	rootEvt, err := cli.GetEvent(ctx, room, root)
	if err == nil {
		if rootEvt.RoomID == "" {
			rootEvt.RoomID = room
		}
		rootEvt = dec.plain(ctx, cli.UserID, rootEvt)
	}
	switch {
	case err != nil && isRefusal(err):
		// Gone, or never readable by this reader: there is no thread to recall.
		return nil, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("reading thread root %s: %w", root, err)
	case rootEvt.RoomID != "" && rootEvt.RoomID != room || rootEvt.Type != event.EventMessage:
		rootEvt = nil
	default:
		rootEvt.RoomID = room
	}
	inThread := func(evt *event.Event) bool { return threadOf(evt) == root }
	w := &walker{fetch: relationsFetch(cli, room, root, dec), size: min(n+1, maxChunk)}
	err = w.start(ctx, nil)
	var items []item
	if err == nil {
		items, _, _, err = collect(ctx, w, n, inThread, nil)
	}
	if err != nil && isUnsupported(err) {
		ms := &messageStream{cli: cli, room: room, decrypt: dec}
		w = &walker{fetch: ms.fetch, size: TailScanBound, bound: TailScanBound}
		if err = w.start(ctx, nil); err == nil {
			items, _, _, err = collect(ctx, w, n, inThread, func(evt *event.Event) bool { return evt.ID == root })
		}
	}
	if err != nil {
		return rootEvt, nil, err
	}
	replies := make([]*event.Event, len(items))
	for i, it := range items {
		it.evt.RoomID = room
		replies[i] = it.evt
	}
	return rootEvt, replies, nil
}
