/* Sites whose code was unloaded (dlclose): their return addresses may
 * come back as another library's code, so what they learned goes. */
#ifndef MB_SITE_UNLOAD_H
#define MB_SITE_UNLOAD_H

struct mb_modules;

/* After a successful dlclose, given the modules loaded before it
 * (modules.h): the sites keyed on code that was unloaded learn again, the
 * others keep what they know. With NULL (the list could not be taken),
 * every site learns again. Takes the loader's lock: no lock of ours held. */
void mb_sites_code_unmapped(struct mb_modules *before);

#endif
