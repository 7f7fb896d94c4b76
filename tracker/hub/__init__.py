"""The Hub client: the one room that talks to the Hub, through huggingface_hub only (`client.py`)."""
