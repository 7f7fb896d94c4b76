"""Stand-ins for the outside world, served on loopback: what the tests, the benchmarks and `hubwatch demo`
talk to instead of the Hub, OSV and webhook receivers. The daemon never imports them.

replay/ is the Hub (recorded repo histories served as the huggingface_hub client expects: control.py
holds the state tests drive, protocol.py answers the Hub's API); osv.py the OSV API (osv_data/ its
records); receiver.py a recording webhook receiver; loopback.py the threaded HTTP server they share.
"""
