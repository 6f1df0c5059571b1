Feature: An encrypted room the daemon is not set to read is told so, never ignored in silence
  In order to know why an agent does not answer in a room Element made encrypted
  As a person in that room
  I want each agent bound to it to say once that it cannot read the room, and what to do instead

  Element creates private rooms and direct chats end-to-end encrypted, and a daemon reads them
  only with zooid.yaml's encryption: true (features/encrypted_agents.feature). Without it an
  m.room.encrypted event wakes nobody. The first time the daemon meets a bound room's encryption
  (an encrypted event, or the m.room.encryption event that turns it on), each agent bound to the
  room posts one notice there, top-level; the daemon records it in its state dir, so neither a
  second message nor a restart posts it again. The humans' encrypted messages here are opaque
  ciphertext no key opens, as the daemon sees a room whose keys it lacks, unless a human has an
  end-to-end encryption device: mautrix's own crypto then really encrypts the message, shares
  the room key with the room's devices, and another human's device decrypts it (the daemon's
  agents have no device without encryption: true, so for them it stays unreadable).

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"
    And the daemon keeps a trace

  Scenario: a mention in an encrypted room gets one notice from each agent bound to it
    Given "#ops" is end-to-end encrypted
    When ori says in "#ops", encrypted: "@agent-a can someone audit svc-a"
    Then agent-a posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-a sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-a in a room without encryption." top-level in "#ops"
    And agent-b posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-b sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-b in a room without encryption." top-level in "#ops"
    And the trace of "#ops" shows "can someone audit svc-a" waking nobody (encrypted)
    And the trace of "#ops" records agent-a posting "This room is end-to-end encrypted" once

  Scenario: humans with devices read each other's encrypted messages, and the agents are still told they cannot
    Given "#ops" is end-to-end encrypted
    And ori has an end-to-end encryption device
    And mia has an end-to-end encryption device
    When ori says in "#ops", encrypted: "@agent-a can someone audit svc-a"
    Then mia reads in "#ops", decrypted: "@agent-a can someone audit svc-a"
    And agent-a posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-a sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-a in a room without encryption." top-level in "#ops"
    And the trace of "#ops" shows "can someone audit svc-a" waking nobody (encrypted)
    When mia says in "#ops", encrypted: "@agent-a and svc-b too"
    Then ori reads in "#ops", decrypted: "@agent-a and svc-b too"
    And the trace of "#ops" shows "and svc-b too" waking nobody (encrypted)
    And the trace of "#ops" records agent-a posting "This room is end-to-end encrypted" once

  Scenario: a room key that comes after its message is read once it comes
    Given "#ops" is end-to-end encrypted
    And ori has an end-to-end encryption device
    And mia has an end-to-end encryption device
    When ori says in "#ops", encrypted, its room key held back: "@agent-a the standby takes over at six"
    Then mia cannot decrypt "@agent-a the standby takes over at six" in "#ops" yet
    When ori sends the room key it held back in "#ops"
    Then mia reads in "#ops", decrypted: "@agent-a the standby takes over at six"
    And the trace of "#ops" shows "the standby takes over at six" waking nobody (encrypted)

  Scenario: a second encrypted message gets no second notice
    Given "#ops" is end-to-end encrypted
    When ori says in "#ops", encrypted: "@agent-a can someone audit svc-a"
    Then agent-a posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-a sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-a in a room without encryption." top-level in "#ops"
    When mia says in "#ops", encrypted: "@agent-a and svc-b too"
    Then the trace of "#ops" shows "and svc-b too" waking nobody (encrypted)
    And agent-a posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-a sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-a in a room without encryption." top-level in "#ops"
    And agent-b posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-b sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-b in a room without encryption." top-level in "#ops"
    And the trace of "#ops" records agent-a posting "This room is end-to-end encrypted" once

  Scenario: a restarted daemon does not tell the room again
    Given "#ops" is end-to-end encrypted
    And the daemon runs as its own process
    When ori says in "#ops", encrypted: "@agent-a can someone audit svc-a"
    Then agent-a posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-a sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-a in a room without encryption." top-level in "#ops"
    When the daemon is stopped and started again
    And ori says in "#ops", encrypted: "@agent-a are you back?"
    Then the trace of "#ops" shows "are you back?" waking nobody (encrypted)
    And agent-a posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-a sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-a in a room without encryption." top-level in "#ops"
    And agent-b posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-b sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-b in a room without encryption." top-level in "#ops"
    And the trace of "#ops" records agent-a posting "This room is end-to-end encrypted" once

  Scenario: a room turning encrypted mid-conversation is told so at once
    Given agent-a will reply "on it"
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    Then agent-a posts "on it" in the thread
    When ori turns on encryption in "#ops"
    Then agent-a posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-a sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-a in a room without encryption." top-level in "#ops"
    And agent-b posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-b sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-b in a room without encryption." top-level in "#ops"
    When mia says in "#ops", encrypted: "@agent-a any news?"
    Then the trace of "#ops" shows "any news?" waking nobody (encrypted)
    And agent-a posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-a sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-a in a room without encryption." top-level in "#ops"
    And the trace of "#ops" records agent-a posting "This room is end-to-end encrypted" once

  @fake-only
  Scenario: a notice the homeserver refused is posted with the room's next encrypted message
    Given "#ops" is end-to-end encrypted
    And the homeserver answers every PUT /_matrix/client/v3/rooms/*/send/m.room.message/zooid-encrypted-room-agent-a-* from agent-a with 403 M_FORBIDDEN
    When ori says in "#ops", encrypted: "@agent-a can someone audit svc-a"
    Then the homeserver's last fault fired once
    And agent-b posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-b sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-b in a room without encryption." top-level in "#ops"
    And agent-a has posted nothing containing "end-to-end encrypted"
    When the homeserver answers normally again
    And mia says in "#ops", encrypted: "@agent-a any news?"
    Then agent-a posts "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-a sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-a in a room without encryption." top-level in "#ops"
