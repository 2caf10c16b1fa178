"""Deterministic RLE-Bench participant for family 03 (Tabletop Physical Reasoning): it writes the scripted
balance participant (roboswe/rle/tabletop/participants.py) into its workspace as a sandbox script over
`import robot`, execs it once and finishes; the simulator then ends and scores the attempt."""

from ._agent import TabletopDemoAgent as TabletopDemoAgent
