@routing
Feature: A thread is a conversation
  In order to keep several conversations with an agent apart
  As a person in a Matrix room
  I want each thread to be its own agent session, and /clear to start it afresh

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"

  Scenario: the agent answers a top-level mention in a thread on it
    Given agent-a will reply "looking into svc-a"
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    Then agent-a posts "looking into svc-a" in the thread

  Scenario: a new session's first prompt says where it is, who spoke and how to read more
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    Then agent-a's prompt with "can someone audit svc-a" is exactly:
      """
      [zooid] room: {#ops:alias} ({#ops}) · thread: {$thread} · from: ori ({@ori})
      [zooid] Read more of this thread with zooid_get_thread_history {"thread_id": "{$thread}"}.

      can someone audit svc-a
      """

  Scenario: a second message in the thread reaches the same session
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    And agent-a is prompted with "can someone audit svc-a"
    And ori replies in the thread: "@agent-a and svc-b too"
    Then agent-a is prompted with "and svc-b too" in the same session as "can someone audit svc-a"
    And agent-a's prompt with "and svc-b too" is exactly:
      """
      and svc-b too
      """
    And agent-a has had 1 session

  Scenario: an agent mentioned in a running thread is told to catch up
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    And agent-a is prompted with "can someone audit svc-a"
    And mia replies in the thread: "@agent-b can you check the certificates?"
    Then agent-b's prompt with "can you check the certificates?" is exactly:
      """
      [zooid] room: {#ops:alias} ({#ops}) · thread: {$thread} · from: mia ({@mia})
      [zooid] This thread has messages from before this session: catch up with zooid_get_thread_history {"thread_id": "{$thread}"}.

      can you check the certificates?
      """

  Scenario: another thread gets a session of its own
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    And agent-a is prompted with "can someone audit svc-a"
    And mia says in "#ops": "@agent-a what changed in svc-c?"
    Then agent-a is prompted with "what changed in svc-c?" in a new session
    And agent-a has had 2 sessions

  Scenario: a bare reply goes to the agent that last spoke in the thread
    Given agent-a will reply "svc-a looks fine"
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    And agent-a posts "svc-a looks fine" in the thread
    And mia replies in the thread: "what about its certificates?"
    Then agent-a is prompted with "what about its certificates?" in the same session as "can someone audit svc-a"
    And agent-b is not prompted with "what about its certificates?"

  Scenario: mentioning another agent in the thread switches the addressee
    Given agent-b will reply "I can take the certificates"
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    And agent-a is prompted with "can someone audit svc-a"
    And mia replies in the thread: "@agent-b can you check the certificates?"
    And agent-b posts "I can take the certificates" in the thread
    And ori replies in the thread: "when will it be done?"
    Then agent-b is prompted with "when will it be done?"
    And agent-a is not prompted with "when will it be done?"

  Scenario: /clear ends the thread's session and the next message starts a new one
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    And agent-a is prompted with "can someone audit svc-a"
    And ori clears the thread
    And ori replies in the thread: "@agent-a start over: audit svc-b"
    Then agent-a is prompted with "start over: audit svc-b" in a new session
    And agent-a has had 2 sessions

  Scenario: after a daemon restart, a bare reply still reaches the agent the thread was talking to, told to catch up
    Given the daemon runs as its own process
    And agent-b will reply "svc-b is degraded"
    And agent-b will reply "yes, restarting it now"
    When ori says in "#ops": "@agent-b how is svc-b?"
    Then agent-b posts "svc-b is degraded" in the thread
    When the daemon is killed and started again
    And ori replies in the thread: "can you restart it?"
    Then agent-b is prompted with "can you restart it?" in a new session
    And agent-b's prompt with "can you restart it?" is exactly:
      """
      [zooid] room: {#ops:alias} ({#ops}) · thread: {$thread} · from: ori ({@ori})
      [zooid] This thread has messages from before this session: catch up with zooid_get_thread_history {"thread_id": "{$thread}"}.

      can you restart it?
      """
    And agent-b posts "yes, restarting it now" in the thread
    And agent-a is not prompted with "can you restart it?"

  # The daemon keeps no routing memory across a restart and reads none at start-up:
  # the first bare reply in a thread it has no memory of reads that thread (its
  # root and newest replies), however far back in the room the thread began.
  # Fake-only because the 600 messages would cost a Synapse pass about 15 s;
  # the scenario above runs the same recall on Synapse.
  @fake-only
  Scenario: after a restart, a bare reply in a thread 600 messages back still reaches its agent, and start-up read no history
    Given the daemon runs as its own process
    And agent-b will reply "svc-b is degraded"
    And agent-b will reply "yes, restarting it now"
    When ori says in "#ops": "@agent-b how is svc-b?"
    Then agent-b posts "svc-b is degraded" in the thread
    When mia posts 600 messages in "#ops"
    And the daemon is killed and started again
    And ori replies in the thread: "can you restart it?"
    Then agent-b is prompted with "can you restart it?" in a new session
    And agent-b posts "yes, restarting it now" in the thread
    And agent-a is not prompted with "can you restart it?"
    And the homeserver was asked no GET /_matrix/client/v3/rooms/*/messages as an agent
    And the homeserver was asked GET /_matrix/client/v1/rooms/*/relations/*/* at most once as an agent

  # When the thread can't be read back, that one reply is routed without the
  # memory (nobody is the addressee) and the thread stays unknown, so the next
  # reply reads it again.
  @fake-only
  Scenario: after a restart, a thread the homeserver fails to read back loses its addressee for that reply only
    Given the daemon runs as its own process
    And agent-b will reply "svc-b is degraded"
    And agent-b will reply "yes, restarting it now"
    When ori says in "#ops": "@agent-b how is svc-b?"
    Then agent-b posts "svc-b is degraded" in the thread
    When the daemon is killed and started again
    And the homeserver answers the next 4 GET /_matrix/client/v1/rooms/*/relations/*/* from agent-a with 503 M_UNKNOWN
    And ori replies in the thread: "can you restart it?"
    Then the homeserver's last fault fired 4 times
    And agent-b is not prompted with "can you restart it?"
    When ori replies in the thread: "hello?"
    Then agent-b is prompted with "hello?" in a new session
    And agent-b posts "yes, restarting it now" in the thread

  Scenario: after a graceful daemon restart, the fresh agent in an old thread is told to catch up too
    Given the daemon runs as its own process
    And agent-b will reply "svc-b is degraded"
    When ori says in "#ops": "@agent-b how is svc-b?"
    Then agent-b posts "svc-b is degraded" in the thread
    When the daemon is stopped and started again
    And ori replies in the thread: "can you restart it?"
    Then agent-b's prompt with "can you restart it?" is exactly:
      """
      [zooid] room: {#ops:alias} ({#ops}) · thread: {$thread} · from: ori ({@ori})
      [zooid] This thread has messages from before this session: catch up with zooid_get_thread_history {"thread_id": "{$thread}"}.

      can you restart it?
      """

  Scenario: an idle agent's process stops, and the thread's next message starts a fresh one told where to catch up
    Given agent processes stop after 1 second idle
    And agent-a will reply "svc-a is fine"
    And agent-a will reply "restarting svc-a"
    When ori says in "#ops": "@agent-a how is svc-a?"
    Then agent-a posts "svc-a is fine" in the thread
    And agent-a's process stops
    When ori replies in the thread: "please restart it"
    Then agent-a is prompted with "please restart it" in a new session
    And agent-a's prompt with "please restart it" is exactly:
      """
      [zooid] room: {#ops:alias} ({#ops}) · thread: {$thread} · from: ori ({@ori})
      [zooid] This thread has messages from before this session: catch up with zooid_get_thread_history {"thread_id": "{$thread}"}.

      please restart it
      """
    And agent-a posts "restarting svc-a" in the thread
