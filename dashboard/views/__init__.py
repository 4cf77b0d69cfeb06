"""Dashboard pages: plain function views, one module per page (routes in dashboard/urls_pages.py).

Views read through dashboard.selectors (the page-shaped reads are in selectors/pages.py) and
write only through dashboard.services; every write is a POST checked by Django's CSRF
middleware (htmx sends the token from the ``hx-headers`` of <body>).
"""
