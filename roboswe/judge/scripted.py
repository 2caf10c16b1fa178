"""The scripted judge: pixel rules on the rendered views, offline (configs/judges/scripted.toml).

A local participant (provider kind ``python``) that answers the judge's request as a model would, with
one ``report_conditions`` call, from the pictures alone. Per task and condition a rule looks at one
camera's first or final picture: the share of a region's pixels within ``tolerance`` of a colour decides
between two verdicts (``present`` / ``absent``); a region too dark to show anything is unobservable.
Conditions without a rule are unobservable. ``answer = "broken"`` sends arguments its schema refuses
(for tests of the error path).
"""

from __future__ import annotations

import json
import re
import time
import zlib
from typing import Annotated, Any, Literal

import msgspec
import numpy as np

from roboswe.protocol.participant import (
    Attempt,
    Decision,
    DecisionRequest,
    ImagePart,
    TextPart,
    ToolCallPart,
    Turn,
)
from roboswe.records.schema import sha256_hex

from .request import TOOL, Verdict

Fraction = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]


class PixelRule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    camera: str
    picture: Literal["first", "final"] = "final"
    region: Annotated[list[Fraction], msgspec.Meta(min_length=4, max_length=4)]  # x0, y0, x1, y1 of the image
    colour: Annotated[list[int], msgspec.Meta(min_length=3, max_length=3)]  # RGB
    tolerance: int = 40  # largest per-channel difference that counts as the colour
    share: Fraction  # of the region's pixels: at least this many of the colour means ``present``
    present: Verdict
    absent: Verdict
    dark: float = 12.0  # mean brightness (0-255) of the region below which nothing can be seen


def decode_png(data: bytes) -> np.ndarray:
    """RGB of an 8-bit RGB PNG whose rows use the NONE, SUB or UP filter (what sim.png writes); ValueError else."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        header, idat = (body, idat) if kind == b"IHDR" else (header, idat + body if kind == b"IDAT" else idat)
        pos += 12 + length
    width, height = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    if header[8:10] != b"\x08\x02" or header[12] != 0:
        raise ValueError("not an 8-bit, non-interlaced RGB PNG")
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, width * 3 + 1)
    out = np.empty((height, width * 3), np.uint8)
    for y in range(height):
        kind, row = raw[y, 0], raw[y, 1:]
        if kind == 0:
            out[y] = row
        elif kind == 1:  # each byte plus the same channel one pixel left: a running sum per channel
            out[y] = (np.cumsum(row.reshape(width, 3).astype(np.int64), axis=0) % 256).reshape(-1)
        elif kind == 2:
            out[y] = row + (out[y - 1] if y else 0)
        else:
            raise ValueError(f"row filter {kind} is not one sim.png writes")
    return out.reshape(height, width, 3)


def judge_picture(rule: PixelRule, rgb: np.ndarray) -> tuple[Verdict, str]:
    h, w = rgb.shape[:2]
    x0, y0, x1, y1 = rule.region
    region = rgb[int(y0 * h):max(int(y1 * h), int(y0 * h) + 1), int(x0 * w):max(int(x1 * w), int(x0 * w) + 1)]
    brightness = float(region.mean())
    if brightness < rule.dark:
        return "unobservable", f"the region is dark (mean brightness {brightness:.1f} < {rule.dark})"
    near = np.all(np.abs(region.astype(np.int16) - np.array(rule.colour, np.int16)) <= rule.tolerance, axis=2)
    share = float(near.mean())
    found = share >= rule.share
    verdict = rule.present if found else rule.absent
    return verdict, (f"{share:.1%} of the region's pixels are near RGB {tuple(rule.colour)} "
                     f"({'at least' if found else 'under'} {rule.share:.1%})")


class ScriptedJudge:
    """``rules``: task id -> condition id -> PixelRule (as plain data, from the config's options)."""

    def __init__(self, rules: dict[str, dict[str, Any]] | None = None, answer: Literal["tool", "broken"] = "tool"):
        self.rules = msgspec.convert(rules or {}, dict[str, dict[str, PixelRule]])
        self.answer = answer

    def decide(self, request: DecisionRequest) -> Decision:
        opening = next(p.text for p in request.conversation[0].parts if isinstance(p, TextPart))
        task = re.match(r"Task (\S+)\.", opening).group(1)  # type: ignore[union-attr]
        ids = request.tools[0].parameters["properties"]["conditions"]["items"]["properties"]["id"]["enum"]
        pictures: dict[str, list[tuple[str, ImagePart]]] = {}
        label = ""
        for part in request.conversation[0].parts:
            if isinstance(part, TextPart) and part.text.startswith("picture "):
                label = part.text.removeprefix("picture ")
            elif isinstance(part, ImagePart):
                pictures.setdefault(part.camera, []).append((label, part))
        verdicts = [self._condition(cid, self.rules.get(task, {}).get(cid), pictures, request.images) for cid in ids]
        arguments = (json.dumps({"conditions": verdicts}) if self.answer == "tool"
                     else json.dumps({"conditions": [{**v, "verdict": "probably"} for v in verdicts]}))
        call = ToolCallPart(call_id=f"call-judge-{time.monotonic_ns()}", name=TOOL, arguments=arguments)
        turn = Turn(id=f"scripted-{time.monotonic_ns()}", role="assistant", provider="python", parts=[call])
        # The exchange as the `python` participant records its own: the request without image bytes, the answer.
        sent, said = msgspec.json.encode(msgspec.structs.replace(request, images={})), msgspec.json.encode(turn)
        attempt = Attempt(number=1, started_at=time.time(), latency_s=0.0, outcome="ok", request=sent, response=said,
                          request_sha256=sha256_hex(sent), response_sha256=sha256_hex(said))
        return Decision(turn=turn, operation=None, call_id=call.call_id, attempts=[attempt], model="scripted")

    @staticmethod
    def _condition(cid: str, rule: PixelRule | None, pictures: dict[str, list[tuple[str, ImagePart]]],
                   images: dict[str, bytes]) -> dict[str, Any]:
        if rule is None:
            return {"id": cid, "verdict": "unobservable", "evidence": "no pixel rule for this condition", "views": []}
        shown = pictures.get(rule.camera)
        if not shown:
            return {"id": cid, "verdict": "unobservable", "evidence": f"no picture from {rule.camera}", "views": []}
        label, part = shown[-1] if rule.picture == "final" else shown[0]
        try:
            verdict, evidence = judge_picture(rule, decode_png(images[part.digest]))
        except (KeyError, ValueError, zlib.error) as e:
            verdict, evidence = "unobservable", f"the picture cannot be read: {e}"
        return {"id": cid, "verdict": verdict, "evidence": f"{label}: {evidence}", "views": [label]}
