"""Sonification of query matches as a MIDI file (seed 002, "Sonification with RQL").

Every matching cut plays one note.  Its pitch grows with the match's severity (a numeric
expression chosen by the user), scaled linearly from the severity range onto a pitch range;
its start follows the cut's HLC time, compressed by ``hlc_us_per_s`` (HLC µs per second of
sound; 1e6 plays in real time).  Each query is one voice (track, channel, instrument) and a
voice is monophonic: a note lasts ``note_s`` or until the next note starts, and notes that fall
on the same MIDI tick are pushed one tick apart so none is lost and their order is kept.
A severity that is undefined or not a number plays the lowest pitch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mido

from replicalab.hlc.query import Match

TICKS_PER_BEAT = 480
TEMPO_US_PER_BEAT = 500_000  # 120 beats per minute
TICKS_PER_S = TICKS_PER_BEAT * 1_000_000 // TEMPO_US_PER_BEAT  # 960 ticks per second


@dataclass(frozen=True)
class SonifyConfig:
    """How matches become notes: pitch range (MIDI numbers), time compression, note length."""

    pitch_low: int = 48
    pitch_high: int = 84
    hlc_us_per_s: float = 1_000_000.0
    note_s: float = 0.12
    severity_range: tuple[float, float] | None = None  # None: the severities' own min..max
    velocity: int = 100

    def __post_init__(self) -> None:
        if not 0 <= self.pitch_low <= self.pitch_high <= 127:
            raise ValueError(f"pitch range {self.pitch_low}..{self.pitch_high} must lie in "
                             "0..127, low first")
        if self.hlc_us_per_s <= 0 or self.note_s <= 0:
            raise ValueError("hlc_us_per_s and note_s must be positive")
        if not 1 <= self.velocity <= 127:
            raise ValueError(f"velocity {self.velocity} must lie in 1..127")


@dataclass(frozen=True)
class Note:
    """One note: start and end in MIDI ticks (``TICKS_PER_S`` per second), pitch, channel."""

    start_tick: int
    end_tick: int
    pitch: int
    channel: int = 0
    velocity: int = 100

    @property
    def start_s(self) -> float:
        """Return the start in seconds from the beginning of the file."""
        return self.start_tick / TICKS_PER_S


@dataclass(frozen=True)
class Voice:
    """The notes of one query, played on one channel with one General MIDI program."""

    name: str
    notes: list[Note]
    channel: int = 0
    program: int = 0


def _numeric(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return None


def pitch_of(severity: Any, lo: float, hi: float, cfg: SonifyConfig) -> int:
    """Return the MIDI pitch of ``severity`` scaled from ``[lo, hi]`` onto the pitch range
    (clamped; the lowest pitch when undefined, not a number, or ``lo == hi``)."""
    v = _numeric(severity)
    if v is None or hi <= lo:
        return cfg.pitch_low
    frac = min(1.0, max(0.0, (v - lo) / (hi - lo)))
    return cfg.pitch_low + round(frac * (cfg.pitch_high - cfg.pitch_low))


def severity_range(severities: Sequence[Any]) -> tuple[float, float]:
    """Return (min, max) of the numeric severities ((0, 0) when there are none)."""
    nums = [v for v in map(_numeric, severities) if v is not None]
    return (min(nums), max(nums)) if nums else (0.0, 0.0)


def plan_notes(times_us: Sequence[int], severities: Sequence[Any], cfg: SonifyConfig,
               t0_us: int | None = None, channel: int = 0) -> list[Note]:
    """Return one note per (HLC time in µs, severity), in time order, starting at ``t0_us``
    (default: the first time) and never overlapping within the voice."""
    if len(times_us) != len(severities):
        raise ValueError("one severity per time is needed")
    if not times_us:
        return []
    order = sorted(range(len(times_us)), key=lambda i: times_us[i])
    t0 = min(times_us) if t0_us is None else t0_us
    lo, hi = cfg.severity_range or severity_range(severities)
    ticks = [round((times_us[i] - t0) / cfg.hlc_us_per_s * TICKS_PER_S) for i in order]
    note_ticks = max(1, round(cfg.note_s * TICKS_PER_S))
    notes: list[Note] = []
    prev_end = 0
    for k, i in enumerate(order):
        start = max(ticks[k], prev_end)
        room = ticks[k + 1] - start if k + 1 < len(order) else note_ticks
        end = start + max(1, min(note_ticks, room))
        notes.append(Note(start, end, pitch_of(severities[i], lo, hi, cfg), channel,
                          cfg.velocity))
        prev_end = end
    return notes


def voice_for(name: str, matches: Sequence[Match], cfg: SonifyConfig, *, channel: int = 0,
              program: int = 0, t0_us: int | None = None) -> Voice:
    """Return the voice of one query's matches (their ``severity`` sets the pitch)."""
    notes = plan_notes([m.time.l for m in matches], [m.severity for m in matches], cfg,
                       t0_us, channel)
    return Voice(name, notes, channel, program)


def write_midi(path: str | os.PathLike[str], voices: Sequence[Voice]) -> float:
    """Write a type-1 MIDI file with one track per voice; return its length in seconds."""
    mid = mido.MidiFile(type=1, ticks_per_beat=TICKS_PER_BEAT)
    meta = mido.MidiTrack()
    meta.append(mido.MetaMessage("set_tempo", tempo=TEMPO_US_PER_BEAT, time=0))
    meta.append(mido.MetaMessage("track_name", name="replicalab hlc sonify", time=0))
    mid.tracks.append(meta)
    for voice in voices:
        track = mido.MidiTrack()
        track.append(mido.MetaMessage("track_name", name=voice.name[:120], time=0))
        track.append(mido.Message("program_change", channel=voice.channel,
                                  program=voice.program, time=0))
        events: list[tuple[int, int, mido.Message]] = []
        for n in voice.notes:
            # offs sort before ons at the same tick so back-to-back notes do not cut each other
            events.append((n.start_tick, 1, mido.Message("note_on", channel=n.channel,
                                                         note=n.pitch, velocity=n.velocity)))
            events.append((n.end_tick, 0, mido.Message("note_off", channel=n.channel,
                                                       note=n.pitch, velocity=0)))
        events.sort(key=lambda e: (e[0], e[1]))
        now = 0
        for tick, _, msg in events:
            track.append(msg.copy(time=tick - now))
            now = tick
        mid.tracks.append(track)
    mid.save(path)
    return float(mid.length)


def read_notes(path: str | os.PathLike[str]) -> list[Note]:
    """Return the notes of a MIDI file, ordered by start tick then channel (for checking)."""
    mid = mido.MidiFile(path)
    notes: list[Note] = []
    for track in mid.tracks:
        now = 0
        on: dict[tuple[int, int], tuple[int, int]] = {}
        for msg in track:
            now += msg.time
            if msg.type == "note_on" and msg.velocity > 0:
                on[(msg.channel, msg.note)] = (now, msg.velocity)
            elif msg.type in ("note_off", "note_on"):
                start = on.pop((msg.channel, msg.note), None)
                if start is not None:
                    notes.append(Note(start[0], now, msg.note, msg.channel, start[1]))
    notes.sort(key=lambda n: (n.start_tick, n.channel))
    return notes
