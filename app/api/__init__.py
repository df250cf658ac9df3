"""The OpenAI-compatible speech API, served by the running app (same process, GPU worker and engine):
`POST /v1/audio/speech`, `GET /v1/audio/voices`, `GET /v1/models`. docs/api.md describes it."""
