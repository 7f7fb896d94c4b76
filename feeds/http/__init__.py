"""The HTTP server: the FastAPI app (app.py), the JSON API (api.py, api_models.py), inbound Hub webhooks
(hubhooks.py), metrics, and what the routes share (auth, params, request-body limits, strict JSON)."""
