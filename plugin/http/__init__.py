"""The HTTP API (``affect-memory serve``): memories, recall, users and conversations as JSON.

Built on Starlette and served by uvicorn (the ``http`` extra). ``context`` holds what every
handler shares and runs blocking store calls under the timeout; ``problems`` turns every
refusal into an ``application/problem+json`` document; ``requests`` reads and checks bodies,
path segments and query parameters, and ``memory_records`` the API's memory objects.
``exposure`` decides who may serve where and ``auth`` who may ask. One module per group of
endpoints (``status``, ``users``, ``memories``, ``recall``, ``conversations``, the
``inspector``'s pages); ``app`` mounts them, ``openapi`` describes them, ``server`` runs them.
"""
