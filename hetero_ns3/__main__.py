from hetero_ns3.cli.main import entry

entry()
