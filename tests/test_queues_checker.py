"""The delivery checker on generated histories whose duplicates, losses, unexpected
messages, overlapping leases and stale receipts are known: each is counted exactly."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.checkers.deliveries import check_deliveries
from replicalab.queues.record import OBSERVER, PRODUCER, QueueLog

S = 1_000_000_000
LEASE = 30 * S


@dataclass
class Plan:
    sent: str  # acked | info | none
    delivered: int
    processed: int
    committed: int
    deleted: bool
    dead: bool
    overlap: bool  # the second delivery comes inside the first one's lease
    stale: int  # deletes refused for a stale receipt
    accepted_stale: bool  # a delete with the first receipt accepted after a redelivery
    fenced: int  # commits refused: their fencing token was superseded
    uncertain: int  # commits whose outcome stayed unknown
    landed: int = 0  # ... of which the effect store holds an effect


@st.composite
def plans(draw) -> Plan:
    sent = draw(st.sampled_from(["acked", "acked", "acked", "info", "none"]))
    k = draw(st.integers(0, 4))
    p = draw(st.integers(0, k))
    c = draw(st.integers(0, p))
    plan = Plan(sent, k, p, c, draw(st.booleans()) and k > 0,
                draw(st.booleans()) and sent == "acked" and c == 0,
                draw(st.booleans()) and k >= 2, draw(st.integers(0, 2)) if k else 0,
                draw(st.booleans()) and k >= 2, draw(st.integers(0, p - c)),
                draw(st.integers(0, 1)) if p > c else 0)
    plan.landed = draw(st.integers(0, plan.uncertain))
    return plan


def build(messages: list[Plan], read_back: bool = False) -> tuple[QueueLog, list[str]]:
    """Return the record of ``messages`` (with the effect store read back: one ``effect``
    row per message, holding its commits and the uncertain ones that landed) and the
    dead-lettered ids."""
    log = QueueLog()
    dead = []
    for n, m in enumerate(messages):
        tag, mid = f"t{n}", f"m{n}"
        t0 = n * 1000 * S
        if m.sent != "none":
            i = log.invoke("send", PRODUCER, t0, tag=tag)
            if m.sent == "acked":
                log.done(i, t0 + 1, msg_id=mid)
            else:
                log.done(i, t0 + 1, "info")
        receipts = []
        for j in range(m.delivered):
            at = t0 + S + (S if (m.overlap and j == 1) else j * 100 * S)
            r = f"{mid}.{j}"
            receipts.append((at, r))
            log.record("deliver", j % 3, at - 1, at, tag=tag, msg_id=mid, receipt=r,
                       count=j + 1, lease_ns=LEASE)
        for j in range(m.processed):
            at = receipts[j][0]
            log.record("process", 0, at + 10, at + 20, tag=tag, msg_id=mid,
                       receipt=receipts[j][1])
        log.record("process", 1, t0 + 5, t0 + 6, "info", tag=tag)  # a crash: never counted
        for j in range(m.committed):
            log.record("commit", 0, receipts[j][0] + 30, receipts[j][0] + 30, tag=tag,
                       receipt=receipts[j][1])
        for j in range(m.fenced):
            log.record("commit", 2, receipts[j][0] + 40, receipts[j][0] + 41, "fail", tag=tag)
        for j in range(m.uncertain):
            log.record("commit", 2, receipts[j][0] + 50, receipts[j][0] + 51, "info", tag=tag,
                       receipt=receipts[m.committed + j][1])
        if read_back and (m.sent != "none" or m.delivered):
            found = [f"c0.0.{r}" for _, r in receipts[:m.committed + m.landed]]
            log.record("effect", OBSERVER, t0 + 990 * S, t0 + 990 * S, tag=tag,
                       count=len(found), note=";".join(found))
        end = t0 + 900 * S
        for _ in range(m.stale):
            log.record("delete", 0, end, end + 1, "stale", tag=tag, msg_id=mid,
                       receipt=f"{mid}.old")
        if m.accepted_stale:
            log.record("delete", 0, end + 2, end + 3, tag=tag, msg_id=mid,
                       receipt=receipts[0][1])
        if m.deleted:
            log.record("delete", 0, end + 4, end + 5, tag=tag, msg_id=mid,
                       receipt=receipts[-1][1])
        if m.dead:
            dead.append(mid)
    return log, dead


def results(m: Plan, read_back: bool) -> int:
    """Return how many results message ``m`` has: the effects in the store when it was read
    back, else the commits its consumers saw land."""
    return m.committed + (m.landed if read_back else 0)


@settings(max_examples=100, deadline=None)
@given(st.lists(plans(), max_size=25), st.booleans())
def test_generated_histories_are_counted_exactly(messages, read_back):
    log, dead = build(messages, read_back)
    s = check_deliveries(log.columns(), dead)["summary"]
    acked = [m for m in messages if m.sent == "acked"]
    # the accounting closes: every acknowledged message in exactly one of five categories
    assert s["committed_once"] == sum(results(m, read_back) == 1 for m in acked)
    assert s["committed_more_than_once"] == sum(results(m, read_back) > 1 for m in acked)
    assert s["dead_lettered_without_commit"] == sum(
        results(m, read_back) == 0 and m.dead for m in acked)
    assert s["lost"] == sum(1 for m in acked if results(m, read_back) == 0 and not m.dead)
    assert s["not_reached"] == 0
    assert (s["committed_once"] + s["committed_more_than_once"]
            + s["dead_lettered_without_commit"] + s["lost"] + s["not_reached"]
            == s["messages"])
    assert s["results_from"] == ("effect store" if read_back and messages
                                 and any(m.sent != "none" or m.delivered for m in messages)
                                 else "consumer record")
    assert s["effects_agree_with_log"] in ((True,) if s["results_from"] == "effect store"
                                           else (None,))
    assert s["messages"] == len(acked)
    assert s["deliveries"] == sum(m.delivered for m in messages)
    assert s["duplicate_deliveries"] == sum(max(0, m.delivered - 1) for m in messages)
    assert s["duplicate_processing"] == sum(max(0, m.processed - 1) for m in messages)
    assert s["duplicate_results"] == sum(max(0, results(m, read_back) - 1) for m in messages)
    assert s["interrupted_processing"] == len(messages)
    assert s["fenced_commits"] == sum(m.fenced for m in messages)
    assert s["uncertain_results"] == sum(m.uncertain for m in messages)
    assert s["results"] == sum(results(m, read_back) for m in messages)
    assert s["consumer_logged_results"] == sum(m.committed for m in messages)
    assert s["dead_lettered"] == sum(m.dead for m in messages)
    assert s["unexpected"] == sum(1 for m in messages if m.sent == "none" and m.delivered)
    assert s["overlapping_leases"] == sum(m.overlap for m in messages)
    assert s["stale_deletes_refused"] == sum(m.stale for m in messages)
    assert s["stale_receipts_accepted"] == sum(m.accepted_stale for m in messages)
    assert s["deleted"] == sum(1 for m in messages if m.deleted or m.accepted_stale)
    expected_results = {n for n, m in enumerate(messages) if results(m, read_back)}
    assert s["filtered_results"] == len(expected_results)
    # exactly once: every acknowledged message committed once (a dead letter without a
    # commit is not), none twice, nothing unsent committed; from the record alone, no
    # commit of unknown outcome either
    assert s["exactly_once"] == (all(results(m, read_back) == 1 for m in acked)
                                 and all(results(m, read_back) <= 1 for m in messages)
                                 and not any(results(m, read_back) for m in messages
                                             if m.sent == "none")
                                 and (read_back or not any(m.uncertain for m in messages)))
    timeline = check_deliveries(log.columns(), dead)["timeline"]
    # the timeline is the consumers' record of when commits landed
    assert sum(timeline["results"]) == s["consumer_logged_results"]
    if not read_back:
        assert sum(timeline["duplicate_results"]) == s["duplicate_results"]
    assert sum(timeline["fenced_commits"]) == s["fenced_commits"]


def test_cost_latency_and_throughput():
    log = QueueLog()
    log.record("send", PRODUCER, 0, 1, tag="a", msg_id="m")
    log.record("deliver", 0, 1, 2 * S, tag="a", msg_id="m", receipt="r", lease_ns=LEASE)
    log.record("claim", 0, 2 * S, 2 * S + 100_000_000, tag="a")
    log.record("claim_read", 0, 2 * S + 100_000_000, 2 * S + 120_000_000, tag="a")
    log.record("process", 0, 2 * S + 120_000_000, 3 * S, tag="a", receipt="r")
    log.record("commit", 0, 4 * S, 4 * S, tag="a")
    s = check_deliveries(log.columns())["summary"]
    assert s["store_ops_per_message"] == 2
    assert s["queue_ops_per_message"] == 1  # the send
    assert abs(s["added_latency_ms"] - 120.0) < 1e-9
    assert abs(s["throughput_per_s"] - 1 / 4) < 1e-9


def test_a_lease_handed_on_within_a_round_trip_is_not_an_overlap():
    ms = 1_000_000

    def overlaps(second_reply_ns: int) -> int:
        log = QueueLog()
        log.record("send", PRODUCER, 0, 1, tag="a", msg_id="m")
        log.record("deliver", 0, 0, 10 * ms, tag="a", msg_id="m", receipt="r1", lease_ns=LEASE)
        log.record("deliver", 1, second_reply_ns - 10 * ms, second_reply_ns, tag="a",
                   msg_id="m", receipt="r2", lease_ns=LEASE)
        return check_deliveries(log.columns())["summary"]["overlapping_leases"]

    # the server may have started lease 1 at once (invoke 0): it surely ended at 30 s
    assert overlaps(LEASE + 5 * ms) == 0
    assert overlaps(LEASE - 1 * ms) == 1


def _one_message(commits: int, effects: list[str]) -> dict:
    log = QueueLog()
    log.record("send", PRODUCER, 0, 1, tag="a", msg_id="m")
    for j in range(2):
        log.record("deliver", j, 10 + j, 20 + j, tag="a", msg_id="m", receipt=f"r{j}",
                   count=j + 1, lease_ns=LEASE)
    for j in range(commits):
        log.record("commit", j, 30 + j, 40 + j, tag="a", msg_id="m", receipt=f"r{j}")
    log.record("effect", OBSERVER, 50, 60, tag="a", count=len(effects), note=";".join(effects))
    return check_deliveries(log.columns())


def test_results_come_from_the_store_and_the_record_is_cross_checked():
    # the store holds what the consumers recorded: they agree
    agree = _one_message(1, ["c0.0.r0"])["summary"]
    assert agree["results"] == 1 and agree["effects_agree_with_log"] and agree["exactly_once"]
    # a consumer recorded a commit the store does not hold: the store's count wins
    # (the message is lost to an observer), and the disagreement is reported
    missing = _one_message(1, [])
    assert missing["summary"]["results"] == 0 and missing["summary"]["lost"] == 1
    assert missing["summary"]["effects_agree_with_log"] is False
    assert missing["effects_log_disagreements"] == ["a"]
    # the store holds two effects where the record saw one land: committed twice
    extra = _one_message(1, ["c0.0.r0", "c1.0.r1"])["summary"]
    assert extra["results"] == 2 and extra["committed_more_than_once"] == 1
    assert extra["effects_agree_with_log"] is False and extra["exactly_once"] is False
    # an effect naming a delivery whose consumer recorded no commit is a disagreement too
    stranger = _one_message(1, ["c1.0.r1"])["summary"]
    assert stranger["results"] == 1 and stranger["effects_agree_with_log"] is False


def test_cut_short_processing_is_named_by_its_cause_and_deliveries_match_the_chart():
    log = QueueLog()
    log.record("send", PRODUCER, 0, 1, tag="a", msg_id="m")
    # a replication race: two deliveries with one receive count, then a redelivery
    for j, count in enumerate((1, 1, 2)):
        log.record("deliver", j, 10 + j, 20 + j, tag="a", msg_id="m", receipt=f"r{j}",
                   count=count, lease_ns=LEASE)
    log.record("process", 0, 30, 40, "info", tag="a", receipt="r0", note="run ended")
    log.record("process", 1, 30, 40, "info", tag="a", receipt="r1", note="crashed")
    log.record("process", 2, 30, 40, "info", tag="a", receipt="r2", note="run ended")
    out = check_deliveries(log.columns())
    s = out["summary"]
    assert s["interrupted_processing_by"] == {"a crash": 1, "the end of the run": 2}
    assert s["max_receive_count"] == 2
    # the table's figure is the chart's: the most times one message was delivered
    assert s["max_deliveries_of_one_message"] == 3 == max(map(int, out["histograms"]
                                                              ["deliveries"]))


def _two_messages(read_b: str = "ok", uncertain_b: bool = False, commit_b: bool = True
                  ) -> QueueLog:
    """Message a committed once and read back; message b committed (or not), its effects
    read back, unreadable, or never read (``read_b``)."""
    log = QueueLog()
    for tag, mid in (("a", "ma"), ("b", "mb")):
        log.record("send", PRODUCER, 0, 1, tag=tag, msg_id=mid)
        log.record("deliver", 0, 10, 20, tag=tag, msg_id=mid, receipt=f"{mid}.0", count=1,
                   lease_ns=LEASE)
        log.record("process", 0, 20, 30, tag=tag, msg_id=mid, receipt=f"{mid}.0")
    log.record("commit", 0, 30, 40, tag="a", receipt="ma.0")
    log.record("effect", OBSERVER, 50, 60, tag="a", count=1, note="c0.0.ma.0")
    if commit_b:
        log.record("commit", 0, 30, 40, tag="b", receipt="mb.0")
    if uncertain_b:
        log.record("commit", 1, 30, 40, "info", tag="b", receipt="mb.1")
    if read_b == "ok":
        log.record("effect", OBSERVER, 50, 60, tag="b", count=int(commit_b),
                   note="c0.0.mb.0" if commit_b else "")
    elif read_b == "unreadable":
        log.record("effect", OBSERVER, 50, 60, "info", tag="b", note="unreadable: timeout")
    return log


def test_a_message_that_ended_uncommitted_makes_exactly_once_false_even_cut_short():
    # b dead-lettered without a commit: false, whether the run was cut short or not
    for cut in (False, True):
        s = check_deliveries(_two_messages(commit_b=False).columns(), ["mb"],
                             cut_short=cut)["summary"]
        assert s["dead_lettered_without_commit"] == 1 and s["exactly_once"] is False, cut
    # b not reached in a run cut short: not decided
    s = check_deliveries(_two_messages(commit_b=False).columns(), cut_short=True)["summary"]
    assert s["not_reached"] == 1 and s["exactly_once"] is None
    # ... and lost when the run was not cut short
    s = check_deliveries(_two_messages(commit_b=False).columns())["summary"]
    assert s["lost"] == 1 and s["exactly_once"] is False


def test_results_the_read_back_could_not_read_are_labelled_as_the_record_s():
    s = check_deliveries(_two_messages().columns())["summary"]
    assert s["results_from"] == "effect store" and s["results_from_record"] == 0
    assert s["exactly_once"] is True
    out = check_deliveries(_two_messages(read_b="unreadable").columns())
    s = out["summary"]
    assert s["results_from"] == ("effect store, and the consumer record for 1 message(s) "
                                 "whose effects could not be read back"), s["results_from"]
    assert s["results_from_record"] == 1 and out["results_from_record"] == ["b"]
    assert s["committed_once"] == 2 and s["effects_unreadable"] == 1
    # b's record holds a commit of unknown outcome besides the one that landed: from the
    # record alone, exactly once cannot be yes
    s = check_deliveries(_two_messages(read_b="unreadable", uncertain_b=True).columns()
                         )["summary"]
    assert s["results_from_record"] == 1 and s["exactly_once"] is not True
    # read back, the store decides: one effect
    s = check_deliveries(_two_messages(uncertain_b=True).columns())["summary"]
    assert s["exactly_once"] is True


def test_an_effect_older_than_its_message_s_last_token_is_a_stale_commit():
    def run(effect_token: int, granted: tuple[int, ...]) -> dict:
        log = QueueLog()
        log.record("send", PRODUCER, 0, 1, tag="a", msg_id="m")
        for j, token in enumerate(granted):
            log.record("deliver", j, 10 + j, 20 + j, tag="a", msg_id="m", receipt=f"r{j}",
                       count=j + 1, lease_ns=LEASE)
            log.record("claim" if token == 1 else "claim_takeover", j, 20 + j, 21 + j,
                       tag="a", note=f"token {token}")
        log.record("commit", 0, 30, 40, tag="a", receipt="r0")
        log.record("effect", OBSERVER, 50, 60, tag="a", count=1,
                   note=f"c0.0.r0#t{effect_token}")
        return check_deliveries(log.columns())["summary"]

    assert run(2, (1, 2))["fencing_held"] is True
    stale = run(1, (1, 2))
    assert stale["fencing_held"] is False and stale["stale_commits_landed"] == 1
    assert run(1, (1,))["fencing_held"] is True
    # strategies without tokens: nothing to judge
    assert _two_messages().columns() and check_deliveries(
        _two_messages().columns())["summary"]["fencing_held"] is None
