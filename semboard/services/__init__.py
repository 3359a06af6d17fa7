"""Business logic of the site: explicit session, storage and `now`; views and the API stay thin."""
