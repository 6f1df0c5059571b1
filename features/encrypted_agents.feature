Feature: Agents read and answer in end-to-end encrypted rooms
  In order to work with agents in the rooms Element makes, which are encrypted by default
  As a person in such a room
  I want an agent I mention to read my message and answer it, encrypted like the rest of the room

  With zooid.yaml's encryption: true each agent has an end-to-end encryption device of its own,
  made by the daemon as the appservice without a login (MSC4190), its keys in the state dir. Its
  room keys, one-time key counts and device lists come in the transactions the homeserver pushes
  (MSC2409, MSC3202). The daemon decrypts what is sent to a bound room before routing it, so an
  encrypted mention wakes its agent as a plain one does, and what an agent posts in an encrypted
  room is encrypted for the room's devices. A message whose room key never reaches the agents'
  devices gets a notice in its thread instead of silence. The humans here have real devices
  (mautrix's crypto): they encrypt what they say and decrypt what the agents answer.

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"
    And the daemon reads encrypted rooms
    And ori has an end-to-end encryption device
    And mia has an end-to-end encryption device

  Scenario: an encrypted mention is answered, encrypted, and no key is let out
    Given "#ops" is end-to-end encrypted
    And the daemon keeps a trace
    And agent-a will reply "on it"
    When ori says in "#ops", encrypted: "@agent-a can someone audit svc-a"
    Then agent-a is prompted with "can someone audit svc-a"
    And agent-a posts "on it" in the thread
    And what agent-a posted in "#ops" went encrypted
    And agent-b is not prompted with "can someone audit svc-a"
    And the trace of "#ops" shows "can someone audit svc-a" waking agent-a (mention)
    And no secret appears in the trace
    And no secret appears in agent-a's environment, arguments or session/new
    And no secret appears in the daemon's log

  Scenario: a task delegated in an encrypted room is done and reported, every post encrypted
    Given "#ops" is end-to-end encrypted
    And agent-b will reply "svc-a is clean"
    When ori says in "#ops", encrypted: "@agent-a get svc-a audited"
    And agent-a calls zooid_start_task_threads with {"tasks": [{"agent": "agent-b", "prompt": "audit svc-a"}]}
    Then task 1 is started
    And agent-b is prompted once with the task "audit svc-a", under a header from agent-a
    And the task "audit svc-a" ends complete with "svc-a is clean"
    And agent-a's thread gets a notice with the result of "audit svc-a"
    And what agent-a posted in "#ops" went encrypted
    And what agent-b posted in "#ops" went encrypted

  Scenario: a mention whose room key comes after it is answered once the key comes
    Given "#ops" is end-to-end encrypted
    And agent-a will reply "noted"
    When ori says in "#ops", encrypted, its room key held back: "@agent-a the standby takes over at six"
    And ori sends the room key it held back in "#ops"
    Then agent-a is prompted with "the standby takes over at six"
    And agent-a posts "noted" in the thread

  @fake-only
  Scenario: a room key the homeserver has not pushed is read from the agents' inboxes, and the mention is answered
    Synapse can lose a to-device message on the way to an appservice (a transaction it retried,
    or a notification it handled after a later one's) while the device's inbox keeps it.
    Halfway through its wait the daemon reads each agent device's inbox (/sync as the device)
    before asking anyone: agent-b reads the message too. (The daemon reads the inboxes as it
    starts as well; ori speaks once that read is over, or it could find the key first.)

    Given "#ops" is end-to-end encrypted
    And agent-a will reply "noted"
    And the homeserver loses the next 2 encrypted to-device messages for the agents' devices
    And the daemon logs "the start's read of the agent devices' to-device inboxes is over"
    When ori says in "#ops", encrypted: "@agent-a the standby takes over at six"
    Then agent-a is prompted with "the standby takes over at six"
    And agent-a posts "noted" in the thread
    And the homeserver lost 2 to-device messages on the way to the agents' devices
    And the daemon logs "a room key the homeserver had not pushed was in an agent device's inbox"
    When agent-b calls zooid_get_history with {"limit": 10}
    Then the result includes:
      """json
      {"messages": [{"sender": "@ori", "text": "@agent-a the standby takes over at six"}]}
      """
    And no message in the result is undecryptable

  @fake-only
  Scenario: a room key lost while the daemon was down is read from the inboxes as it starts
    A transaction Synapse holds for a retry while the daemon is down loses its to-device
    messages when it is sent again, room keys among them; the devices' inboxes keep them.
    The daemon reads each device's inbox as it starts, so mia's mention, pushed when it is
    back, is answered at once rather than halfway through room_key_wait.

    Given "#ops" is end-to-end encrypted
    And an encrypted message waits 20 seconds for its room key
    And the daemon runs as its own process
    And agent-a will reply "on it"
    And agent-a will reply "noted"
    When ori says in "#ops", encrypted: "@agent-a can someone audit svc-a"
    Then agent-a posts "on it" in the thread
    When the daemon is stopped
    And the homeserver loses the next 2 encrypted to-device messages for the agents' devices
    And mia says in "#ops", encrypted: "@agent-a the standby takes over at six"
    And the daemon is started again
    Then agent-a is prompted with "the standby takes over at six" within 5 seconds
    And agent-a posts "noted" in the thread
    And the homeserver lost 2 to-device messages on the way to the agents' devices

  Scenario: an agent device's inbox on the homeserver is read as it fills, so it does not grow without end
    Synapse keeps each to-device message it pushes to an appservice in the device's inbox until
    the device reads past it, and never drops one unread: the room keys and key requests of a
    busy room would pile up in its database for as long as the daemon runs. The daemon reads a
    device's inbox after each hundred messages pushed to it.

    Given "#ops" is end-to-end encrypted
    When ori sends 250 to-device messages to agent-a's device
    Then the homeserver keeps fewer than 100 to-device messages for agent-a's device

  @fake-only
  Scenario: a room key in no inbox is asked of its sender, and the mention is answered
    A key ori's device took as sent may never have reached the agents' devices at all. With
    nothing in their inboxes, the daemon asks ori's devices for the key from every agent's
    device in the room, and ori's device, having shared it with them, forwards it to each:
    agent-b reads the message too.

    Given "#ops" is end-to-end encrypted
    And agent-a will reply "noted"
    And the homeserver drops the next 2 encrypted to-device messages for the agents' devices, inbox and all
    When ori says in "#ops", encrypted: "@agent-a the standby takes over at six"
    Then agent-a is prompted with "the standby takes over at six"
    And agent-a posts "noted" in the thread
    And the homeserver lost 2 to-device messages on the way to the agents' devices
    And the daemon logs "asked the sender's devices for a room key that has not come"
    When agent-b calls zooid_get_history with {"limit": 10}
    Then the result includes:
      """json
      {"messages": [{"sender": "@ori", "text": "@agent-a the standby takes over at six"}]}
      """
    And no message in the result is undecryptable

  @fake-only
  Scenario: a room key whose forwards are lost too is asked for again, and the mention is answered
    Synapse loses a to-device message for an appservice's device when another one sent close
    by is handled first: the forwards that answer the agents' requests, sent together, are
    lost that way under load. At three quarters of its wait the daemon asks again.

    Given "#ops" is end-to-end encrypted
    And agent-a will reply "noted"
    And the homeserver drops the next 4 encrypted to-device messages for the agents' devices, inbox and all
    When ori says in "#ops", encrypted: "@agent-a the standby takes over at six"
    Then agent-a is prompted with "the standby takes over at six"
    And agent-a posts "noted" in the thread
    And the homeserver lost 4 to-device messages on the way to the agents' devices

  Scenario: a message whose room key never comes gets a notice in its thread and wakes nobody
    Given "#ops" is end-to-end encrypted
    And the daemon keeps a trace
    When ori says in "#ops", encrypted, its room key held back: "@agent-a the standby takes over at six"
    Then agent-a posts "agent-a could not decrypt this message: its room key never reached the agents' devices, so no agent read it. Please send it again; if this keeps happening, check that your client shares room keys with unverified devices." in the thread
    And agent-a is not prompted with "the standby takes over at six"
    And the trace of "#ops" shows "the standby takes over at six" waking nobody (encrypted)

  @fake-only
  Scenario: later messages sent with a room key that never came do not hold the room again
    A room's messages are routed in order, each behind the one before, and a client goes on
    encrypting with one room key for many messages (Element: up to 100, or a week). Once a
    message has waited the whole room_key_wait for its key (the agents' inboxes read, the
    sender asked twice), the sender's later messages with that key get one more look in the
    inboxes and no wait: mia's mention after ori's second message is answered at once, not
    room_key_wait later. Here the homeserver drops ori's room key and the four forwards that
    answer the daemon's two requests. The inbox reads hand the agents' devices nothing they
    were pushed already (agent-a's own room key, which agent-b's device got with the notice),
    which mautrix would refuse, logging each as an error.

    Given "#ops" is end-to-end encrypted
    And an encrypted message waits 6 seconds for its room key
    And agent-b will reply "on it"
    And the homeserver drops the next 6 encrypted to-device messages for the agents' devices, inbox and all
    When ori says in "#ops", encrypted: "@agent-a the standby takes over at six"
    Then agent-a posts "agent-a could not decrypt this message: its room key never reached the agents' devices, so no agent read it. Please send it again; if this keeps happening, check that your client shares room keys with unverified devices." in the thread
    And the homeserver lost 6 to-device messages on the way to the agents' devices
    When ori says in "#ops", encrypted: "@agent-a and the pager goes to mia"
    And mia says in "#ops", encrypted: "@agent-b can someone audit svc-a"
    Then agent-b is prompted with "can someone audit svc-a" within 3 seconds
    And agent-b posts "on it" in the thread
    And the daemon logs "not waited for, the wait for its key was given up on"
    And agent-a is not prompted with "and the pager goes to mia"
    And the daemon has logged nothing with "duplicate olm message"

  Scenario: a room key that comes after its message was given up on is logged as late
    The notice stands; the log line tells an operator that the homeserver delivers room keys
    late (Synapse under load), not never, and how long the message waited: zooid.yaml's
    room_key_wait, which such an operator raises.

    Given "#ops" is end-to-end encrypted
    And an encrypted message waits 4 seconds for its room key
    When ori says in "#ops", encrypted, its room key held back: "@agent-a the standby takes over at six"
    Then agent-a posts "agent-a could not decrypt this message: its room key never reached the agents' devices, so no agent read it. Please send it again; if this keeps happening, check that your client shares room keys with unverified devices." in the thread
    When ori sends the room key it held back in "#ops"
    Then the daemon logs "a room key came after its message was given up on: the homeserver delivered it late"
    And the daemon logs "waited=4s"

  @fake-only
  Scenario: a late room key the homeserver loses on the way is found in the inboxes, and logged as late
    Synapse can lose a late key on the way to the appservice as it loses any to-device message.
    After giving up on a message the daemon reads the agents' inboxes for its key now and then
    (at one, three and seven times room_key_wait), so the late key is still logged.

    Given "#ops" is end-to-end encrypted
    And an encrypted message waits 2 seconds for its room key
    When ori says in "#ops", encrypted, its room key held back: "@agent-a the standby takes over at six"
    Then agent-a posts "agent-a could not decrypt this message: its room key never reached the agents' devices, so no agent read it. Please send it again; if this keeps happening, check that your client shares room keys with unverified devices." in the thread
    When the homeserver loses the next 2 encrypted to-device messages for the agents' devices
    And ori sends the room key it held back in "#ops"
    Then the daemon logs "a room key came after its message was given up on: the homeserver delivered it late"
    And the homeserver lost 2 to-device messages on the way to the agents' devices

  Scenario: a restarted daemon keeps its agents' devices and reads the room's keys from before
    Given "#ops" is end-to-end encrypted
    And the daemon runs as its own process
    And agent-a will reply "on it"
    And agent-a will reply "still here"
    When ori says in "#ops", encrypted: "@agent-a can someone audit svc-a"
    Then agent-a posts "on it" in the thread
    And agent-a has one end-to-end encryption device
    When the daemon is stopped and started again
    And ori says in "#ops", encrypted: "@agent-a are you back?"
    Then agent-a is prompted with "are you back?"
    And agent-a posts "still here" in the thread
    And agent-a has one end-to-end encryption device

  Scenario: a room turning encrypted mid-conversation is read on, and answered encrypted
    Given agent-a will reply "on it"
    And agent-a will reply "still on it"
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    Then agent-a posts "on it" in the thread
    When ori turns on encryption in "#ops"
    And ori says in "#ops", encrypted: "@agent-a is svc-a done?"
    Then agent-a is prompted with "is svc-a done?"
    And agent-a posts "still on it" in the thread
    And agent-a has posted nothing containing "not set to read encrypted rooms"

  Scenario: an agent reads an encrypted thread back in plain text
    Given "#ops" is end-to-end encrypted
    And agent-a will reply "on it"
    When ori says in "#ops", encrypted: "@agent-a can someone audit svc-a"
    Then agent-a posts "on it" in the thread
    When mia replies in the thread, encrypted: "and svc-b too"
    And agent-a calls zooid_get_thread_history with {"thread_id": "$thread"}
    Then the result includes:
      """json
      {"messages": [
        {"sender": "@ori", "text": "@agent-a can someone audit svc-a"},
        {"sender": "@agent-a", "text": "on it", "is_agent": true},
        {"sender": "@mia", "text": "and svc-b too"}
      ]}
      """
    And no message in the result is undecryptable

  Scenario: reading history says which message the agent's device could not decrypt
    Given "#ops" is end-to-end encrypted
    When ori says in "#ops", encrypted: "deploys are frozen until noon"
    And mia says in "#ops", encrypted, its room key held back: "the standby takes over at six"
    Then agent-a posts "agent-a could not decrypt this message: its room key never reached the agents' devices, so no agent read it. Please send it again; if this keeps happening, check that your client shares room keys with unverified devices." in the thread
    When agent-a calls zooid_get_history with {"limit": 10}
    Then the result includes:
      """json
      {"messages": [
        {"sender": "@ori", "text": "deploys are frozen until noon"},
        {"sender": "@mia", "undecryptable": true, "text": "[undecryptable: this message's room key has not reached this agent's device]"}
      ]}
      """

  Scenario: a recording made with an agent's device holds the encrypted messages in plain text, each marked
    Given "#ops" is end-to-end encrypted
    And agent-a will reply "on it"
    When mia says in "#ops": "a word in the clear"
    And ori says in "#ops", encrypted: "@agent-a can someone audit svc-a"
    Then agent-a posts "on it" in the thread
    When "#ops" is recorded as agent-a with its device
    Then the recording holds "@agent-a can someone audit svc-a" decrypted
    And the recording holds "on it" decrypted
    And the recording holds "a word in the clear" in the clear
    And no secret appears in the recording

  Scenario: an agent's device tops its one-time keys up when people's devices have claimed most of them
    Given "#ops" is end-to-end encrypted
    And agent-a will reply "on it"
    When 45 one-time keys of agent-a's device are claimed
    And ori says in "#ops", encrypted: "@agent-a can someone audit svc-a"
    Then agent-a posts "on it" in the thread
    And agent-a's device has at least 45 one-time keys on the homeserver

  Scenario: a person who left is not given the room key of what an agent says while they are away
    Given "#ops" is end-to-end encrypted
    And agent-a will reply "on it"
    And agent-a will reply "svc-a has one open port"
    When ori says in "#ops", encrypted: "@agent-a can someone audit svc-a"
    Then agent-a posts "on it" in the thread
    And mia can decrypt what agent-a posted: "on it"
    When mia leaves "#ops"
    And ori says in "#ops", encrypted: "@agent-a what did you find?"
    Then agent-a posts "svc-a has one open port" in the thread
    When mia joins "#ops"
    Then mia cannot decrypt what agent-a posted: "svc-a has one open port"

  Scenario: messages sent with one room key that never comes get one notice between them
    Given the homeserver has user "sam"
    And "#ops" is end-to-end encrypted
    And the daemon keeps a trace
    When sam says in "#ops", encrypted: "@agent-a the standby takes over at six"
    Then agent-a posts "agent-a could not decrypt this message: its room key never reached the agents' devices, so no agent read it. Please send it again; if this keeps happening, check that your client shares room keys with unverified devices." in the thread
    When sam says in "#ops", encrypted: "@agent-a and the pager goes to mia"
    Then the trace of "#ops" shows "and the pager goes to mia" waking nobody (encrypted)
    And agent-a is not prompted with "and the pager goes to mia"
    And the trace of "#ops" records agent-a posting "could not decrypt this message" once
