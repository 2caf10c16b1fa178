"""Local `python` participants (run config `agent = "roboswe.agents.<name>:<Class>"`)."""
