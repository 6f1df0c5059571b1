@mcp
Feature: Paging through history with cursors
  In order to read as far back as a question needs, and no further
  As an agent reading a busy room
  I want pages of a bounded size, opaque cursors that only work where they came from, and an exact has_more

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"
    And "#ops" has 800 messages in 40 threads from ori, mia, agent-a and agent-b

  Scenario Outline: a page holds the limit asked for, 50 by default, at most 200
    When agent-a calls <tool> with <arguments>
    Then the result has <n> <entries>
    And has_more is true

    Examples:
      | tool                     | arguments       | n   | entries  |
      | zooid_get_history        | {}              | 50  | messages |
      | zooid_get_history        | {"limit": 7}    | 7   | messages |
      | zooid_get_history        | {"limit": 1000} | 200 | messages |
      | zooid_get_recent_threads | {}              | 50  | threads  |
      | zooid_get_recent_threads | {"limit": 1000} | 200 | threads  |

  Scenario: a page of long messages holds fewer entries, and the walk still reads every one whole
    Claude Code cuts a tool result past 100,000 characters, and the cut would take the page's
    next_before with it; a page stays within 64 KiB instead, as many entries as fit.
    Given mia posts 30 messages of 6000 bytes in "#ops"
    When agent-a pages zooid_get_history with {"limit": 200} until has_more is false
    Then every page's result was at most 65536 bytes
    And page 2 of the walk held 10 entries
    And agent-a saw each message mia posted in "#ops" exactly once, in order
    And agent-a saw each of the 800 generated messages of "#ops" exactly once, in order
    And has_more was true on every page but the last

  Scenario: a limit below 1 is an input error
    When agent-a calls zooid_get_history with {"limit": 0}
    Then the call is refused with "invalid_argument"

  Scenario: walking the whole history sees every message once, in order
    When agent-a pages zooid_get_history with {"limit": 200} until has_more is false
    Then agent-a saw each of the 800 generated messages of "#ops" exactly once, in order
    And has_more was true on every page but the last
    And every page had at most 200 messages

  Scenario: messages arriving in the middle of a walk neither repeat nor hide history
    When agent-a pages zooid_get_history with {"limit": 200} for 3 pages
    And mia posts 10 messages in "#ops"
    And agent-a pages on until has_more is false
    Then agent-a saw each of the 800 generated messages of "#ops" exactly once, in order
    And has_more was true on every page but the last

  Scenario: a cursor from one thread is refused in another
    When agent-a calls zooid_get_thread_history with {"thread_id": "#ops/thread-38", "limit": 2}
    And agent-a calls zooid_get_thread_history with {"thread_id": "#ops/thread-37", "before": "$next_before"}
    Then the call is refused with "invalid_cursor"

  Scenario: a cursor from another tool is refused
    When agent-a calls zooid_get_history with {"limit": 5}
    And agent-a calls zooid_get_recent_threads with {"before": "$next_before"}
    Then the call is refused with "invalid_cursor"

  Scenario: a tampered cursor is refused
    When agent-a calls zooid_get_history with {"limit": 5}
    And agent-a calls zooid_get_history with {"limit": 5, "before": "$tampered_next_before"}
    Then the call is refused with "invalid_cursor"

  Scenario: the overview pages back to the first thread with an exact has_more
    When agent-a pages zooid_get_recent_threads with {"limit": 200} until has_more is false
    Then agent-a saw each of the 40 generated thread roots of "#ops" exactly once
    And has_more was true on every page but the last
