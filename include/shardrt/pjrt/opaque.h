// Forward declarations of the PJRT C API's opaque handle types, so that headers of the pjrt
// layer can name them without including pjrt_c_api.h (which only src/pjrt/*.cc includes).
#pragma once

extern "C" {
struct PJRT_Api;
struct PJRT_Error;
struct PJRT_Event;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_Memory;
struct PJRT_Buffer;
struct PJRT_LoadedExecutable;
struct PJRT_Executable;
}
