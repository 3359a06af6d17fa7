"""The site's languages: which it speaks, how a reader's is chosen, catalogues and direction."""
