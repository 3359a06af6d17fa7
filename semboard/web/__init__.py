"""Web plumbing shared by views and API: forms, upload names, file responses, HTTP errors."""
