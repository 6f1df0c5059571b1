@fake-only
Feature: The daemon killed between a post and the journal write that records it
  In order to trust that nothing is doubled or lost when the daemon dies at the worst moment
  As a person who mentioned an agent
  I want what was posted before the crash neither posted again nor contradicted

  The daemon process arms a fault point (internal/faultpoint) and SIGKILLs itself between a
  post and the journal write that records it. A turn whose agent had finished journals its
  closing words before posting them, so the next start posts them (again, with the same txn
  ids) instead of calling the turn interrupted. A finished turn leaves the journal before its end
  is written to the trace, so a trace that shows a turn ended (what a recording keeps and a replay
  compares) is never followed by that turn answered again. A task whose root was posted but not
  yet journaled had woken nobody, so it is not cancelled: the next start finishes its post with
  the same txn id (or adopts the root it finds) and the task runs to its result.

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "planner", "coder", "reviewer" and "tester" are bound to "#ops"

  Scenario: killed after a turn's reply is posted, before the turn is acknowledged
    Given the daemon runs as its own process
    And coder will reply "svc-a is up"
    And the daemon will be killed at its fault point "turn.reply_posted"
    When ori says in "#ops": "@coder is svc-a up?"
    Then the daemon dies at "turn.reply_posted" and is started again
    And coder will reply "you are welcome"
    When ori replies in the thread: "@coder thanks"
    Then coder posts "you are welcome" in the thread
    And coder posts "svc-a is up" in the thread
    And coder has posted nothing containing "interrupted"

  Scenario: killed after a turn's closing words are journaled, before they are posted
    Given the daemon runs as its own process
    And coder will reply "svc-a is up"
    And the daemon will be killed at its fault point "turn.closing_journaled"
    When ori says in "#ops": "@coder is svc-a up?"
    Then the daemon dies at "turn.closing_journaled" and is started again
    And coder posts "svc-a is up" in the thread
    And coder will reply "you are welcome"
    When ori replies in the thread: "@coder thanks"
    Then coder posts "you are welcome" in the thread
    And coder is prompted once with "is svc-a up?"
    And coder has posted nothing containing "interrupted"

  Scenario: killed after a task's result is posted, before the journal says so
    Given the daemon runs as its own process
    And coder will reply "svc-a is clean"
    And the daemon will be killed at its fault point "task.result_posted"
    When ori says in "#ops": "@planner please audit svc-a"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then task 1 is started
    And the daemon dies at "task.result_posted" and is started again
    And the task "audit svc-a" ends complete with "svc-a is clean"
    And planner's thread gets a notice with the result of "audit svc-a"
    And planner is woken once with the result of "audit svc-a"
    And the task "audit svc-a" has exactly one root in "#ops"

  Scenario: killed just after a turn's end is traced, nothing of that turn is done again
    Given the daemon keeps a trace
    And the daemon runs as its own process
    And coder will reply "svc-a is up"
    And the daemon will be killed at its fault point "turn.end_traced"
    When ori says in "#ops": "@coder is svc-a up?"
    Then the daemon dies at "turn.end_traced" and is started again
    And coder will reply "you are welcome"
    When ori replies in the thread: "@coder thanks"
    Then coder posts "you are welcome" in the thread
    And the trace of "#ops" records coder posting "svc-a is up" once
    And coder is prompted once with "is svc-a up?"
    And coder has posted nothing containing "interrupted"

  Scenario: killed after a task's root is posted, before the task journal records it
    Given the daemon runs as its own process
    And coder will reply "svc-a is clean"
    And the daemon will be killed at its fault point "task.root_posted"
    When ori says in "#ops": "@planner please audit svc-a"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}, and the daemon dies before answering
    Then the daemon dies at "task.root_posted" and is started again
    And the task "audit svc-a" has exactly one root in "#ops"
    And the task "audit svc-a" ends complete with "svc-a is clean"
    And coder is prompted once with the task "audit svc-a", under a header from planner
    And planner's thread gets a notice with the result of "audit svc-a"
    And planner is woken once with the result of "audit svc-a"
    And the task "audit svc-a" has exactly one root in "#ops"
