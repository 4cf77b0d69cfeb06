"""Dashboard pages: plain function views, one module per page (routes in dashboard/urls_pages.py).

Each page reads through the selectors module of the same name (dashboard/selectors/) and
writes only through dashboard.services; every write is a POST checked by Django's CSRF
middleware (htmx sends the token from the ``hx-headers`` of <body>).
"""
