// Package fakehs is a fake Matrix homeserver for tests: an in-process server
// (New for a test, Start otherwise) speaking the client-server API in v1.12
// shapes and pushing to application services, with the semantics of
// Synapse, the reference implementation. `zooid fakehs` runs it standalone.
//
// All state is in memory behind one RWMutex. Every event gets a position in
// one global stream; a room keeps its events in a slice ordered by that
// position, so a /messages page is a binary search plus the page, whatever
// the room's size. Pagination tokens are such positions, bound to their
// room by an HMAC; sync tokens are global positions. Thread roots are kept
// ordered by latest reply, so /threads never scans the room either.
//
// Where Synapse and the spec disagree, the server follows Synapse:
//   - /messages returns `end` with every non-empty page, also the one that
//     reaches m.room.create (dir=b) or the newest event (dir=f), and leaves
//     it out only on the empty page after (the spec says "omitted when there
//     are no further events").
//   - An appservice may act only as users it has registered with
//     m.login.application_service; namespace users are NOT created on first
//     use (403 M_FORBIDDEN), and ?user_id= outside the namespace is 403
//     M_FORBIDDEN. Registering outside the namespace is 400 M_EXCLUSIVE, and
//     a normal user registering inside an exclusive namespace is too.
//   - Transactions carry the hs_token as a Bearer header and also as
//     ?access_token= for appservices that predate the header.
//   - A user who left a room may still read its history up to the leave;
//     leaving again is 200 {} with no new event, and an unknown room is 404
//     M_UNKNOWN. (Synapse does not cap dir=f /messages at the leave; fakehs
//     does, as the spec's "shared" visibility asks.)
//   - An appservice may create aliases (createRoom's room_alias_name, PUT
//     /directory/room) only inside its registration's alias namespaces,
//     exclusive or not; others may not create one inside an exclusive alias
//     namespace. Both are 400 M_EXCLUSIVE. /register/available answers a name
//     in an exclusive user namespace with 400 M_EXCLUSIVE, and /register with
//     any access token but without "type": "m.login.application_service" is
//     400 M_UNKNOWN.
//   - A relation (rel_type and event_id in m.relates_to) must name a known
//     event of the same room, and a thread cannot start from an event that
//     has a relation itself (a thread reply, an edit): 400 M_UNKNOWN. A bare
//     m.in_reply_to is not checked.
//   - A redacted event loses its relation: a redacted thread reply leaves
//     /relations, the root's bundled summary counts one reply fewer with the
//     reply before it as latest_event, and /threads orders the thread by
//     that reply (a thread with no reply left is no thread). Redacting an
//     event fakehs does not know is 200 with an event id shown nowhere; one
//     of another room is 400 M_UNKNOWN.
//   - A state event that replaced another carries unsigned.prev_content,
//     prev_sender and replaces_state wherever it is served (/messages,
//     /sync, pushes, /event).
//   - Bundles: unsigned.m.relations holds m.thread (count, latest_event,
//     current_user_participated), m.replace (the latest applicable edit)
//     and m.reference ({"chunk": [{"event_id"}]}, oldest first); no
//     annotations.
//   - /relations?recurse=true (or org.matrix.msc3981.recurse) follows
//     relations of any type down to five relations from the event (its own
//     and four levels below), says "recursion_depth": 3 all the same, and
//     applies rel_type and event_type only to what it found: a reaction on an
//     m.reference is an m.annotation relation of the reference's parent (the
//     spec, MSC3981, drops events reached through a non-matching one). Every
//     /relations page holds up to limit matching events in stream order and
//     has next_batch only when another matching event follows. recurse other
//     than "true"/"false" is 400 M_INVALID_PARAM. Conformance:
//     Relations/Recurse/ThroughAReference.
//   - /relations of a redacted event leaves out every m.replace (with
//     recurse, the edits of events below it too), and as Synapse does it:
//     after reading limit+1 matching events, so such a page can be short and
//     end without next_batch although events are left. A redacted event has
//     lost its own relation, so recurse does not reach it or what hangs off
//     it. Conformance: Relations/Recurse/OfARedactedEvent.
//   - A /messages filter with lazy_load_members adds `state`: the member
//     event of each sender on the page as it stood at the page's first
//     event; /sync with lazy_load_members in its state filter sends only
//     the members of the user, the timeline's senders and the heroes. A
//     joined room's `summary` is {} unless members are lazy-loaded; then it
//     has the joined and invited counts and up to five m.heroes (other
//     members in the order they came in). A left room carries account_data.
//   - Typing for another user is 400 M_FORBIDDEN.
//   - POST /_matrix/client/v1/appservice/{id}/ping is for the appservice
//     itself (403 M_FORBIDDEN for a user's token or another id); it forwards
//     {"transaction_id"} to the appservice's /_matrix/app/v1/ping with the
//     hs_token and answers {"duration_ms"}, or 502 M_BAD_STATUS with the
//     appservice's status and body, 502 M_CONNECTION_FAILED, 504
//     M_CONNECTION_TIMEOUT, 400 M_URL_NOT_SET.
//   - Transactions carry "ephemeral" only for a registration with
//     receive_ephemeral (always [], as fakehs has no typing, receipts or
//     presence to push), and then "de.sorunome.msc2409.to_device" too; see
//     appservice devices below.
//   - Transaction ids are scoped per device for users and per appservice
//     (whichever user it acts as); the key is the request path, so the same
//     txn id in another room or with another event type is a new event.
//     unsigned.transaction_id is shown to the sender's own device, and for
//     appservice-sent events to appservice requests as that sender.
//   - Event content with floats or integers beyond ±(2^53-1) is 400 M_BAD_JSON.
//   - /rooms/{id}/event/{eventId} answers non-members 404 M_NOT_FOUND, and
//     /relations of an event outside the room 404 M_UNKNOWN.
//   - Other errcodes as Synapse's: GET /profile/{unknown} is 404 M_UNKNOWN
//     (its /displayname 404 M_NOT_FOUND); joining an unknown room id is 404
//     M_UNKNOWN; createRoom with a bad preset is 400 M_BAD_JSON; a bad
//     pagination or sync token is 400 M_UNKNOWN; /sync with an unknown filter
//     id is 400 M_INVALID_PARAM.
//   - Unknown rooms answer 403 M_FORBIDDEN, not 404, so room existence does
//     not leak; a known path with the wrong method is 405 M_UNRECOGNIZED.
//   - Default limits: /messages 10, /relations 5, /threads 5, sync timeline 10.
//     Without dir, /messages pages forwards (from the room's start without
//     from) and /relations backwards.
//   - createRoom with a room version fakehs does not model is 400
//     M_UNSUPPORTED_ROOM_VERSION, as Synapse answers an unknown one.
//     Deliberate difference: fakehs knows versions 1–11; Synapse also
//     accepts "12" and unstable versions.
//   - A message or state event whose PDU would be over 64 KiB is 413
//     M_TOO_LARGE "event too large". Synapse measures the signed federation
//     form in canonical JSON; fakehs keeps no such fields and adds stand-ins
//     of their length (three auth events, one prev event, hash, signature).
//     Deliberate difference: the estimate is within a few bytes, not exact
//     (measured: largest accepted body 64887 bytes on Synapse 1.160, 64900 on
//     fakehs), and Go escapes U+2028/U+2029 longer than canonical JSON does.
//   - End-to-end encryption's server part (e2ee.go; conformance E2EE):
//     /keys/upload answers one_time_key_counts with signed_curve25519 always
//     there (0 when none); a one-time key id uploaded again with other
//     content is 400 M_UNKNOWN. /keys/query answers every device (an empty
//     list) or those named, with failures {} and an empty unsigned per
//     device. /keys/claim hands each one-time key out once, then the
//     device's fallback key again and again, then nothing for that device.
//     /sendToDevice delivers to the device named (one that does not exist
//     gets nothing) or with "*" to every device, once per txn id
//     (Server.LoseToDevice loses the next ones of a type for appservice
//     users' devices, as Synapse can: element-hq/synapse#14710); /sync
//     carries to_device.events until a sync with a later since token, which
//     drops them for good. Every /sync has device_one_time_keys_count and
//     device_unused_fallback_key_types; an incremental one device_lists
//     changed (users sharing a joined room whose device keys changed, and
//     users newly sharing one: a join since the token, theirs or the
//     syncing user's, any member event with membership join, a display name
//     change too, as Synapse counts; invites not modelled) and left (users who
//     no longer share one). Keys and ciphertexts are opaque:
//     nothing is verified, as on a real homeserver. Not modelled: cross-
//     signing keys (query answers them empty), key backup, dehydrated
//     devices.
//   - Appservice devices (asdevices.go; conformance AppserviceDevices), as
//     the test Synapse serves them with its experimental appservice features
//     on: an appservice acting as one of its users (?user_id=) creates a
//     device with PUT /devices/{deviceId} (201, 200 when it exists; MSC4190)
//     and deletes it with DELETE, no user-interactive auth, its keys, tokens
//     and waiting to-device messages with it; ?org.matrix.msc3202.device_id=
//     (or device_id=) makes the request that device's (400
//     ORG.MATRIX.MSC4326.M_UNKNOWN_DEVICE for one that does not exist), so it
//     uploads keys as it; /keys/query shows a device's display name in
//     unsigned.device_display_name; GET /devices lists a user's devices. A
//     registration with receive_ephemeral gets to-device messages for its
//     users' devices in "de.sorunome.msc2409.to_device" (each with
//     to_user_id and to_device_id; they stay in the device's /sync too); one
//     with org.matrix.msc3202 gets, in every transaction,
//     "org.matrix.msc3202.device_one_time_keys_count" (and Synapse's older
//     "…device_one_time_key_counts") and
//     "org.matrix.msc3202.device_unused_fallback_key_types" for every device
//     of its sender, of its users joined to the rooms of the transaction's
//     events and of its to-device recipients ({} and [] for a device
//     without), and "org.matrix.msc3202.device_lists" {"changed", "left"}
//     with its users and users sharing a joined room with them whose devices
//     or device keys changed ("left" always empty, as Synapse 1.160 sends
//     it). A transaction goes out when any of these has something. Users may
//     only rename their devices (PUT); DELETE as a user, which Synapse puts
//     behind user-interactive auth, is refused (401 M_FORBIDDEN).
//
// WithProfile(Degraded) (or any Profile) makes the server do less than
// Synapse, for testing clients against such servers: no /threads, no
// appservice ping, no bundled aggregations, relation filters ignored, event filters applied
// after the page limit, history served to non-members, new events readable
// a moment after their send returns. Requests counts the requests served.
//
// Simplifications a test could notice: no federation, E2EE only as above, no media,
// no push rules, no receipts/typing/presence in /sync (those endpoints
// accept and drop), lazy-loaded members are sent again on every request
// (include_redundant_members is not modelled), history_visibility is always
// treated as "shared", redaction empties the content entirely, and room
// state endpoints are for current members only. Lazy-loaded /messages state
// walks each sender's membership history, so it costs more than a page in a
// room where members changed often.
package fakehs
